// Where a remote model's bytes are and what a cluster makes of it: the disk tier's files joined
// with the models they are copies of (runtime/tier_view.hpp), the instance record's `tiered` list
// both ways with its bounds (cluster/records.hpp), and miss placement's preference for an instance
// whose tier holds the model (cluster/miss_placement.hpp).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cluster/miss_placement.hpp"
#include "cluster/records.hpp"
#include "runtime/tier_view.hpp"

using namespace warm;
using namespace warm::cluster;

namespace {

constexpr std::int64_t now = 1'700'000'000'000;

tier_info two_files() {
  tier_info t;
  t.open = true;
  t.held.push_back({"s3://b/m/1/model.safetensors", 4096, {}});
  t.held.push_back({"https://h/x/model.pt", 512, {"stale"}});
  return t;
}

member instance(const std::string& name, std::uint64_t capacity, std::uint64_t used) {
  member m;
  m.record.name = name;
  m.record.address = "unix:/run/" + name;
  m.record.devices.push_back({"host", "lru", capacity, used, 0, 0, {}});
  return m;
}

placement_inputs two_with_room() {
  placement_inputs in;
  // b has the most room: without the tier, the warm rule's tie-break chooses it.
  in.members = {instance("a", 1000, 500), instance("b", 1000, 0)};
  in.members[0].self = true;
  in.model = "m";
  in.request = {100, 1.0};
  in.now_unix_ms = now;
  return in;
}

}  // namespace

TEST_CASE("each held file lists the models registered from its source, sorted") {
  auto t = two_files();
  attach_models(t, {{"z", "s3://b/m/1/model.safetensors"},
                    {"local", ""},
                    {"a", "s3://b/m/1/model.safetensors"},
                    {"other", "s3://b/other/model.safetensors"}});
  CHECK(t.held[0].models == std::vector<std::string>{"a", "z"});
  CHECK(t.held[1].models.empty());  // replaced: no model names it now
}

TEST_CASE("a remote model's status says whether the tier holds its file and its bytes") {
  const auto t = two_files();
  std::vector<model_status> st(3);
  st[0].source = "s3://b/m/1/model.safetensors";
  st[1].source = "s3://b/gone/model.safetensors";
  st[1].in_tier = true;  // stale: cleared
  st[1].tier_bytes = 9;
  st[2].id = "local";  // no source: nothing tier-related
  mark_tier(st, t);
  CHECK(st[0].in_tier);
  CHECK(st[0].tier_bytes == 4096);
  CHECK_FALSE(st[1].in_tier);
  CHECK(st[1].tier_bytes == 0);
  CHECK_FALSE(st[2].in_tier);
  CHECK(st[2].tier_bytes == 0);
  model_status one;
  one.source = "https://h/x/model.pt";
  mark_tier(one, t);
  CHECK(one.in_tier);
  CHECK(one.tier_bytes == 512);
}

TEST_CASE("an instance record lists the models its tier holds, both ways") {
  inspection state;
  state.tier = two_files();
  state.tier.held[0].models = {"m2", "m1"};
  state.tier.held[1].models = {"m1"};
  auto r = record_from(state, "node-1", "unix:/x", "0.1", 1, false);
  CHECK(r.tiered == std::vector<std::string>{"m1", "m2"});
  CHECK(r.tier_holds("m2"));
  CHECK_FALSE(r.tier_holds("m3"));
  auto back = decode_instance("k", encode(r));
  REQUIRE(back);
  CHECK(back->tiered == r.tiered);
  CHECK(back->same_state(r));
  back->tiered.pop_back();
  CHECK_FALSE(back->same_state(r));
}

TEST_CASE("a record publishes at most max_tiered_models tiered ids") {
  inspection state;
  tier_held h{"s3://b/k", 1, {}};
  for (std::size_t i = 0; i < max_tiered_models + 10; ++i)
    h.models.push_back("m" + std::to_string(100000 + i));
  state.tier.held.push_back(h);
  auto r = record_from(state, "n", "a", "v", 1, false);
  CHECK(r.tiered.size() == max_tiered_models);
  CHECK(decode_instance("k", encode(r)));
}

TEST_CASE("a peer's tiered list is sorted on reading and refused when malformed or too long") {
  instance_record r;
  r.name = "n";
  auto with = [&](const nlohmann::json& tiered) {
    auto doc = nlohmann::json::parse(encode(r));
    doc["tiered"] = tiered;
    return decode_instance("/warm/c/instances/n", doc.dump());
  };
  auto unsorted = with(nlohmann::json::array({"b", "a", "b"}));
  REQUIRE(unsorted);
  CHECK(unsorted->tiered == std::vector<std::string>{"a", "b"});
  CHECK(unsorted->tier_holds("a"));
  auto absent = decode_instance("k", encode(r));
  REQUIRE(absent);
  CHECK(absent->tiered.empty());
  using nlohmann::json;
  for (const auto& bad : {json("a"), json::array({1}), json::array({""}), json::array({"a/b"}),
                          json::array({"a b"}), json::array({std::string(257, 'x')})}) {
    auto refused = with(bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == errc::invalid_argument);
    CHECK(refused.error().message.find("tiered") != std::string::npos);
  }
  std::vector<std::string> many;
  for (std::size_t i = 0; i <= max_tiered_models; ++i)
    many.push_back("m" + std::to_string(i));
  auto too_long = with(json(many));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().message.find("tiered") != std::string::npos);
}

TEST_CASE("miss placement prefers, at equal cost, an instance whose tier holds the model") {
  auto in = two_with_room();
  auto d = decide_placement(in);
  REQUIRE(d.what == placement_decision::action::claim);
  CHECK(d.instance == "b");  // the most room
  in.members[0].record.tiered = {"m"};
  d = decide_placement(in);
  REQUIRE(d.what == placement_decision::action::claim);
  CHECK(d.instance == "a");
  CHECK(d.self);
  // Another model's file in a's tier changes nothing.
  in.members[0].record.tiered = {"n"};
  CHECK(decide_placement(in).instance == "b");
}

TEST_CASE("the tier preference does not outweigh a higher cost") {
  auto in = two_with_room();
  in.members[0].record.tiered = {"m"};
  // a must evict to take the model (its least recent model idle 10 s): a cost b does not have.
  in.members[0].record.devices[0].used = 950;
  in.members[0].record.devices[0].models = 1;
  in.members[0].record.devices[0].idle_seconds = 10;
  CHECK(decide_placement(in).instance == "b");
  // Loads queued on a add their wait: b, with none, wins although a's tier holds the model.
  in.members[0].record.devices[0].used = 0;
  in.members[0].record.loads_in_flight = 3;
  in.members[0].record.loading_threads = 1;
  CHECK(decide_placement(in).instance == "b");
  // Draining or failed there: no candidate whatever its tier holds.
  in.members[0].record.loads_in_flight = 0;
  in.failures.push_back({"m", "a", now - 1000});
  CHECK(decide_placement(in).instance == "b");
}
