// How many copies of a model a cluster keeps (cluster/copy_rule.hpp): the queue meter's windows,
// the add and drop rule with its boundaries, the settle time, the cluster-full test, no oscillation
// at a steady load, excluded instances in placement, and the copies change's JSON.
#include <catch2/catch.hpp>

#include <random>

#include "cluster/copy_rule.hpp"
#include "cluster/miss_placement.hpp"

using namespace warm;
using namespace warm::cluster;

namespace {

constexpr std::int64_t now = 1'800'000'000'000;  // ms

copy_view view(std::uint32_t copies, std::optional<double> recent,
               std::optional<double> slow = std::nullopt) {
  copy_view v;
  v.copies = copies;
  v.room = 8;
  v.recent = recent;
  v.slow = slow;
  v.now_ms = now;
  return v;
}

member instance(const std::string& name, std::uint64_t capacity, std::uint64_t used,
                bool draining = false) {
  member m;
  m.record.name = name;
  m.record.address = "unix:/run/" + name;
  m.record.draining = draining;
  m.record.devices.push_back({"host", "lru", capacity, used, 0, 0, {}});
  return m;
}

}  // namespace

TEST_CASE("the queue meter averages a copy's samples over a window it fully saw") {
  queue_meter q(10'000);
  std::int64_t t = 0;
  for (int i = 0; i < 8; ++i, t += 250)
    q.sample(t, {{"a", i < 4 ? 0u : 4u}, {"b", 1}});
  // Samples at 0..1750; a 1000 ms window holds those after 750: 1000, 1250, 1500, 1750, all 4.
  CHECK(q.mean("a", 1000) == Approx(4.0));
  CHECK(q.mean("b", 1000) == Approx(1.0));
  // 1500 ms: after 250, six samples of which four are busy.
  CHECK(q.mean("a", 1500) == Approx(16.0 / 6));
  // First sampled at 0: a window reaching before it is not judged.
  CHECK_FALSE(q.mean("a", 1751).has_value());
  CHECK(q.mean("a", 1750).has_value());
  CHECK_FALSE(q.mean("c", 1000).has_value());
  // A model that stops being resident loses its history; back, it starts again.
  q.sample(t, {{"b", 1}});
  CHECK_FALSE(q.mean("a", 250).has_value());
  CHECK(q.models() == std::vector<std::string>{"b"});
  q.sample(t += 250, {{"a", 2}, {"b", 1}});
  CHECK_FALSE(q.mean("a", 250).has_value());
  q.sample(t += 250, {{"a", 2}, {"b", 1}});
  CHECK(q.mean("a", 250) == Approx(2.0));
  // A model on two devices is one copy: its requests add up.
  q.sample(t += 250, {{"a", 2}, {"a", 3}, {"b", 1}});
  CHECK(q.mean("a", 250) == Approx(5.0));
}

TEST_CASE("the queue meter forgets what is past its horizon") {
  queue_meter q(1000);
  std::int64_t t = 0;
  for (; t < 1000; t += 100)
    q.sample(t, {{"a", 10}});
  for (; t < 2000; t += 100)
    q.sample(t, {{"a", 0}});
  CHECK(q.mean("a", 1000) == Approx(0.0));
  CHECK_FALSE(q.mean("a", 1001).has_value());  // beyond the horizon
}

TEST_CASE("more copies when a copy's queueing reaches the threshold, as many as the load needs") {
  copy_rule rule;  // add at 2, aim at 1 per copy
  CHECK(decide_copies(rule, view(1, 1.99)) == 0);
  CHECK(decide_copies(rule, view(1, 2.0)) == 1);  // the boundary adds
  CHECK(decide_copies(rule, view(1, 5.0)) == 1);  // at most twice as many as now
  CHECK(decide_copies(rule, view(2, 3.0)) == 2);  // 6 requests: 6 copies wanted, doubling to 4
  CHECK(decide_copies(rule, view(4, 2.5)) == 4);  // 10 wanted, 8 at most
  CHECK(decide_copies(rule, view(3, 2.0)) == 3);  // 6 wanted
  auto v = view(4, 2.5);
  v.room = 1;
  CHECK(decide_copies(rule, v) == 1);  // one instance can take it
  v.room = 0;
  CHECK(decide_copies(rule, v) == 0);
  CHECK(decide_copies(rule, view(1, std::nullopt)) == 0);  // not judged yet
  rule.add_queue = 0;                                      // copies off
  CHECK(decide_copies(rule, view(1, 50.0)) == 0);
}

TEST_CASE("nothing changes within the settle time of the model's last change") {
  copy_rule rule;
  auto v = view(1, 4.0);
  v.last_change_ms = now - rule.settle_ms + 1;
  CHECK(decide_copies(rule, v) == 0);
  v.last_change_ms = now - rule.settle_ms;
  CHECK(decide_copies(rule, v) == 1);
}

TEST_CASE("a copy goes only when the cluster is full and the rest stay below the drop threshold") {
  copy_rule rule;  // drop below 0.5 with one copy fewer
  auto v = view(2, 0.1, 0.24);
  v.cluster_full = true;
  CHECK(decide_copies(rule, v) == -1);  // 0.24 × 2 / 1 = 0.48
  v.slow = 0.25;                        // 0.5: not below
  CHECK(decide_copies(rule, v) == 0);
  v.slow = 0.1;
  v.cluster_full = false;
  CHECK(decide_copies(rule, v) == 0);
  v.cluster_full = true;
  v.copies = 1;  // the last copy stays
  CHECK(decide_copies(rule, v) == 0);
  v.copies = 3;
  v.slow = 0.33;  // 0.33 × 3 / 2 = 0.495
  CHECK(decide_copies(rule, v) == -1);
  v.slow = std::nullopt;  // a copy too new to judge stays
  CHECK(decide_copies(rule, v) == 0);
}

TEST_CASE("a steady load neither oscillates nor stops short") {
  // The cluster is full throughout; each copy's queueing is the total load over the copies.
  copy_rule rule;
  const auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> loads(0.05, 40.0);
  for (int trial = 0; trial < 200; ++trial) {
    const double load = loads(random);
    std::uint32_t copies = 1;
    std::int64_t last_change = 0, t = now;
    int direction = 0, reversals = 0;
    for (int step = 0; step < 60; ++step, t += rule.settle_ms) {
      copy_view v;
      v.copies = copies;
      v.room = 64 - copies;
      v.recent = v.slow = load / copies;
      v.cluster_full = true;
      v.last_change_ms = last_change;
      v.now_ms = t;
      const int change = decide_copies(rule, v);
      if (change == 0) continue;
      const int now_direction = change > 0 ? 1 : -1;
      if (direction != 0 && now_direction != direction) ++reversals;
      direction = now_direction;
      copies = static_cast<std::uint32_t>(static_cast<int>(copies) + change);
      last_change = t;
    }
    INFO("load " << load << ", copies " << copies);
    CHECK(reversals == 0);
    CHECK(load / copies < rule.add_queue);  // enough copies
    if (copies > 1) CHECK(load / (copies - 1) >= rule.drop_queue);
  }
}

TEST_CASE("the copy rule is checked") {
  CHECK(check_copy_rule({}));
  copy_rule r;
  r.drop_queue = 1.0;  // = add / 2: a drop could be undone
  CHECK_FALSE(check_copy_rule(r));
  r.drop_queue = 0.99;
  CHECK(check_copy_rule(r));
  r = {};
  r.add_queue = -1;
  CHECK_FALSE(check_copy_rule(r));
  r = {};
  r.full_fraction = 0;
  CHECK_FALSE(check_copy_rule(r));
  r = {};
  r.settle_ms = 0;
  CHECK_FALSE(check_copy_rule(r));
}

TEST_CASE("the cluster is full when its live instances' used bytes reach the fraction") {
  std::vector<member> ms{instance("a", 100, 90), instance("b", 100, 89),
                         instance("c", 1000, 0, true)};
  CHECK_FALSE(cluster_is_full(ms, 0.9));  // 179 of 200; the draining one does not count
  ms[1].record.devices[0].used = 90;
  CHECK(cluster_is_full(ms, 0.9));
  CHECK_FALSE(cluster_is_full({}, 0.9));
}

// An overcommitted device (used above its capacity, as a record can say after loads raced)
// counts at most its capacity: its excess does not fill the room the other instances still have.
TEST_CASE("an overcommitted device counts at most its capacity toward a full cluster") {
  std::vector<member> ms{instance("a", 100, 150), instance("b", 100, 20)};
  CHECK_FALSE(cluster_is_full(ms, 0.8));  // 100 + 20 of 200 (not 170)
  ms[1].record.devices[0].used = 59;
  CHECK_FALSE(cluster_is_full(ms, 0.8));  // 159 of 200
  ms[1].record.devices[0].used = 60;
  CHECK(cluster_is_full(ms, 0.8));      // 160 of 200: exactly the fraction
  ms[0].record.devices[0].used = 1000;  // however far over, still 100
  CHECK(cluster_is_full(ms, 0.8));
  CHECK_FALSE(cluster_is_full(ms, 0.81));
}

TEST_CASE("placement of a copy passes over the instances excluded") {
  placement_inputs in;
  in.members = {instance("a", 1000, 0), instance("b", 1000, 500), instance("c", 1000, 600)};
  in.members[0].self = true;
  in.model = "m";
  in.request = {100, 1.0};
  in.now_unix_ms = now;
  in.excluded = {"a"};
  auto d = decide_placement(in);
  CHECK(d.what == placement_decision::action::claim);
  CHECK(d.instance == "b");
  // A live claim naming an excluded instance (the first copy's) is not followed.
  in.claims.push_back({"m", {"a", "a", 100, now - 1000}, 7});
  d = decide_placement(in);
  CHECK(d.what == placement_decision::action::claim);
  CHECK(d.instance == "b");
  CHECK(d.expected_revision == 7);
  in.excluded = {"a", "b", "c"};
  CHECK(decide_placement(in).what == placement_decision::action::serve_here);
}

TEST_CASE("a copies change round-trips through its JSON and bad ones are named") {
  copies_change c{3, "warm-1", now};
  auto back = decode_copies("k", encode(c));
  REQUIRE(back);
  CHECK(back->copies == 3);
  CHECK(back->by == "warm-1");
  CHECK(back->changed_unix_ms == now);
  CHECK(copies_key("/warm/x/", "m") == "/warm/x/placement/copies/m");
  auto bad = decode_copies("k", R"({"copies":-1,"by":"a","changed_unix_ms":1})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("copies change at k: copies") == 0);
  CHECK_FALSE(decode_copies("k", "[]"));
}
