// Placement across instances (ranking/ranking.hpp) and the cluster simulator
// (eval/cluster_sim.hpp): hand-made rankings for both rules, the cost of making room after
// reservations, and small traces whose cold starts, waits and shares are worked out by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "eval/cluster_sim.hpp"
#include "policy/cache_policy.hpp"
#include "ranking/ranking.hpp"

using namespace warm;
using ranking::instance_view;
using ranking::placement_rule;

namespace {

instance_view view(std::uint64_t capacity, std::uint64_t used,
                   std::vector<ranking::eviction_candidate> candidates = {}) {
  instance_view v;
  v.capacity = capacity;
  v.used = used;
  v.models = used ? 1 : 0;
  v.candidates = std::move(candidates);
  return v;
}

timestamp at_s(double s) {
  return timestamp{} +
         std::chrono::duration_cast<timestamp::duration>(std::chrono::duration<double>(s));
}

eval::catalog models_of(std::size_t n, std::uint64_t bytes, double load_ms) {
  eval::catalog c;
  for (std::size_t i = 0; i < n; ++i)
    c.push_back({"m" + std::to_string(i), bytes, load_ms});
  return c;
}

}  // namespace

TEST_CASE("the bytes to free count the reservations") {
  auto v = view(100, 90);
  CHECK(ranking::bytes_to_free(v, 10) == 0);
  CHECK(ranking::bytes_to_free(v, 11) == 1);
  v.reserved = 15;
  CHECK(ranking::bytes_to_free(v, 0) == 5);
  CHECK(ranking::bytes_to_free(v, 20) == 25);
}

TEST_CASE(
    "eviction cost: whole models, the cheaper of in order and one alone, beyond the reservations") {
  auto v = view(100, 90, {{10, 1}, {20, 4}, {30, 1}});  // in eviction order
  CHECK(ranking::eviction_cost(v, 10) == 0);            // fits
  CHECK(ranking::eviction_cost(v, 11) == 1);            // the first leaves whole
  CHECK(ranking::eviction_cost(v, 21) ==
        1);  // 11 bytes: the third alone (1) beats the first two (5)
  CHECK(ranking::eviction_cost(v, 41) == 6);  // 31 bytes: all three, no one alone is enough
  CHECK(ranking::eviction_cost(v, 100) == Approx(6 + 30 * 0.1));  // past the last: 0.1 per byte
  v.reserved = 15;                            // 5 bytes to free already: the first model goes
  CHECK(ranking::eviction_cost(v, 5) == 0);   // the room it leaves is free
  CHECK(ranking::eviction_cost(v, 6) == 0);   // 11 bytes: the third alone, for the same value
  CHECK(ranking::eviction_cost(v, 16) == 0);  // 21 bytes: still the third alone
  CHECK(ranking::eviction_cost(v, 36) ==
        5);  // 41 bytes: all three (6), less the 1 already given up
  v.candidates.clear();
  CHECK(ranking::eviction_cost(v, 50) == 0);  // no candidates: no value known
}

// The boundary of "one alone": a candidate holding exactly the bytes to free frees enough, so
// evicting it alone is a valid choice (bytes >= needed, not >); one byte more and it is not.
TEST_CASE("eviction cost: a candidate holding exactly the bytes to free may go alone") {
  auto v = view(100, 90, {{10, 4}, {20, 1}});  // in eviction order
  CHECK(ranking::eviction_cost(v, 30) == 1);   // 20 bytes: the second alone (1), not both (5)
  CHECK(ranking::eviction_cost(v, 31) == 5);   // 21 bytes: no one alone is enough, both in order
  v.reserved = 15;                             // 5 bytes to free already: the second alone (1)
  CHECK(ranking::eviction_cost(v, 15) == 0);   // 20 bytes: still the second alone, nothing more
  // And so in the ranking: the instance whose exact-sized candidate costs 1 beats one costing 3.
  ranking::placement_request r{30, 0.0};
  std::vector<instance_view> all{view(100, 90, {{30, 3}}), view(100, 90, {{10, 4}, {20, 1}})};
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) == std::vector<std::size_t>{1, 0});
}

TEST_CASE("warm placement ranks by the value a load gives up, then its wait, then room") {
  ranking::placement_request r{20, 2.0};
  std::vector<instance_view> all{
      view(100, 90, {{20, 3}}),  // 0: must evict value 3
      view(100, 90, {{20, 1}}),  // 1: must evict value 1
      view(100, 50),             // 2: room for it, 50 left → 30 after
      view(100, 70),             // 3: room, 30 left → 10 after
      view(10, 0),               // 4: too small
  };
  all.push_back(view(100, 0));
  all.back().draining = true;  // 5: draining
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) ==
        std::vector<std::size_t>{2, 3, 1, 0});

  all[2].loads_in_flight = 1;  // a queued load: 2 s of wait behind it
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) ==
        std::vector<std::size_t>{3, 1, 2, 0});
  all[2].loading_threads = 2;  // …half of it with two threads: ties with 1, more room wins
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) ==
        std::vector<std::size_t>{3, 2, 1, 0});
  all[2].loading_threads = 1;
  all[2].loads_in_flight = 2;  // 4 s now: after instance 0's value of 3
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) ==
        std::vector<std::size_t>{3, 1, 0, 2});

  all[3].reserved = 15;  // claims since its record leave it 5 bytes: it must evict,
                         // and publishes no value: last
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) ==
        std::vector<std::size_t>{1, 0, 2, 3});
}

TEST_CASE("warm placement puts instances without a value after those with one, oldest first") {
  ranking::placement_request r{20, 1.0};
  std::vector<instance_view> all{view(100, 90), view(100, 90), view(100, 90, {{30, 50}})};
  all[0].idle_seconds = 5;
  all[1].idle_seconds = 50;
  CHECK(ranking::rank_instances(all, r, placement_rule::warm) == std::vector<std::size_t>{2, 1, 0});
}

TEST_CASE("ModelMesh's order: room first; full ones oldest first; then fewest models, most free") {
  ranking::placement_request r{20, 1.0};
  std::vector<instance_view> all{view(100, 90), view(100, 95), view(100, 60),
                                 view(100, 70), view(100, 0),  view(100, 70)};
  all[0].idle_seconds = 10;
  all[1].idle_seconds = 1000;  // full, oldest: first of the full ones
  all[2].idle_seconds = 10;
  all[3].idle_seconds = 30;
  all[5].idle_seconds = 50;
  all[5].models = 3;
  // With room: 4 has no models, 3 before 2 (less free? no: the same count, 2 has more free),
  // 5 has the most models. Full: 1 (older) then 0.
  CHECK(ranking::rank_instances(all, r, placement_rule::modelmesh) ==
        std::vector<std::size_t>{4, 2, 3, 5, 1, 0});
  all[2].used = 70;  // 2 and 3 now tie on models and room: the older cache timestamp first
  CHECK(ranking::rank_instances(all, r, placement_rule::modelmesh) ==
        std::vector<std::size_t>{4, 3, 2, 5, 1, 0});
}

TEST_CASE("ModelMesh's shortlist stops at the first instance too far from the best") {
  ranking::placement_request r{10, 1.0};
  SECTION("with room: a quarter of the best's room, and counts") {
    std::vector<instance_view> all{view(100, 0), view(100, 70), view(100, 80), view(100, 50)};
    auto ranked = ranking::rank_instances(all, r, placement_rule::modelmesh);
    REQUIRE(ranked == std::vector<std::size_t>{0, 3, 1, 2});
    CHECK(ranking::modelmesh_shortlist(all, ranked, r) == 3);  // 2 has 20 free, under 100 / 4
    all[1].models = 10;  // 10 models against the best's 0: too many
    ranked = ranking::rank_instances(all, r, placement_rule::modelmesh);
    CHECK(ranking::modelmesh_shortlist(all, ranked, r) == 2);
  }
  SECTION("full: cache timestamps within max(45 s, a tenth of the best's age)") {
    std::vector<instance_view> all{view(100, 95), view(100, 95), view(100, 95)};
    all[0].idle_seconds = 1000;
    all[1].idle_seconds = 910;  // 90 s younger: within a tenth of 1000 s
    all[2].idle_seconds = 890;  // 110 s younger: too far
    auto ranked = ranking::rank_instances(all, r, placement_rule::modelmesh);
    REQUIRE(ranked == std::vector<std::size_t>{0, 1, 2});
    CHECK(ranking::modelmesh_shortlist(all, ranked, r) == 2);
    all[0].idle_seconds = 100;
    all[1].idle_seconds = 60;  // 40 s: within 45 s
    all[2].idle_seconds = 50;  // 50 s: too far
    ranked = ranking::rank_instances(all, r, placement_rule::modelmesh);
    CHECK(ranking::modelmesh_shortlist(all, ranked, r) == 2);
  }
  CHECK(ranking::modelmesh_shortlist({}, {}, r) == 0);
}

TEST_CASE("claims spread a burst that stale records send to one new instance") {
  // Three instances nearly full of cheap models and one empty, as their records say. Ten cold
  // models arrive before the next record. ModelMesh's shortlist is the empty instance alone
  // every time; warm's claims queue loads there until waiting behind them costs more than the
  // others' cheapest models.
  ranking::placement_request r{10, 2.0};
  std::vector<instance_view> records{view(100, 95, {{10, 0.5}, {10, 0.5}}),
                                     view(100, 95, {{10, 0.7}, {10, 0.7}}),
                                     view(100, 95, {{10, 0.9}, {10, 0.9}}), view(100, 0)};
  auto claims = records;
  std::vector<int> warm_loads(4, 0), mesh_loads(4, 0);
  for (int k = 0; k < 10; ++k) {
    auto ranked = ranking::rank_instances(records, r, placement_rule::modelmesh);
    REQUIRE(ranking::modelmesh_shortlist(records, ranked, r) == 1);
    ++mesh_loads[ranked.front()];
    auto chosen = ranking::rank_instances(claims, r, placement_rule::warm).front();
    ++warm_loads[chosen];
    claims[chosen].reserved += r.bytes;  // what a claim records
    ++claims[chosen].loads_in_flight;
  }
  CHECK(mesh_loads[3] == 10);
  CHECK(warm_loads[3] < 10);
  CHECK(warm_loads[0] > 0);
  CHECK(*std::max_element(warm_loads.begin(), warm_loads.end()) <= 4);
}

TEST_CASE("placement rules by name") {
  CHECK(*ranking::parse_placement_rule("warm") == placement_rule::warm);
  CHECK(*ranking::parse_placement_rule("modelmesh") == placement_rule::modelmesh);
  auto bad = ranking::parse_placement_rule("random");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("warm, modelmesh") != std::string::npos);
}

TEST_CASE("eviction candidates follow kdf's order and values; other policies publish none") {
  policy_options options;
  auto made_kdf = make_policy("kdf", options);
  REQUIRE(made_kdf);
  auto& kdf = *made_kdf;
  kdf->on_insert("a", 10, 1.0, at_s(0));
  kdf->on_insert("b", 30, 1.0, at_s(0));
  kdf->on_insert("c", 20, 8.0, at_s(0));
  for (int i = 0; i < 5; ++i)
    kdf->on_access("b", at_s(1), 1);
  auto bytes = [](const std::string& id) -> std::uint64_t {
    return id == "a" ? 10 : id == "b" ? 30 : 20;
  };
  auto candidates = ranking::eviction_candidates(*kdf, bytes, at_s(2));
  auto order = kdf->eviction_order(at_s(2));
  REQUIRE(candidates.size() == 3);
  REQUIRE(order.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(candidates[i].bytes == bytes(order[i].model));
    CHECK(candidates[i].value == Approx(order[i].score));
  }
  CHECK(order.front().model == "a");  // the least value per byte
  CHECK(ranking::eviction_candidates(*kdf, bytes, at_s(2), 2).size() == 2);

  auto made_lru = make_policy("lru", options);
  REQUIRE(made_lru);
  auto& lru = *made_lru;
  lru->on_insert("a", 10, 1.0, at_s(0));
  CHECK(ranking::eviction_candidates(*lru, bytes, at_s(2)).empty());
}

TEST_CASE("cluster: a load is waited for once, behind the loads queued before it") {
  auto models = models_of(3, 10, 1000);
  eval::trace t{{0, "m0"}, {0, "m1"}, {100, "m0"}, {1500, "m1"}, {2500, "m1"}};
  eval::cluster_options o;
  o.instances = 1;
  o.instance_capacity = 100;
  auto r = eval::simulate_cluster(t, models, o);
  REQUIRE(r);
  CHECK(r->cold_starts == 2);
  CHECK(r->waited == 4);  // m0, m1, m0 again during its load, m1 at 1.5 s
  CHECK(r->wait_ms_total == Approx(1000 + 2000 + 900 + 500));
  CHECK(r->load_ms_total == Approx(2000));
  CHECK(r->hit_ratio == Approx(1.0 / 5));
  CHECK(r->max_share == 1.0);
}

TEST_CASE("cluster: a cold storm on empty instances is spread") {
  // 50 models requested within a millisecond on 4 empty instances that hold 20 each; every
  // placement sees the records of the start. warm's claims queue the loads evenly; ModelMesh
  // draws among the four at random.
  auto models = models_of(50, 10, 1000);
  eval::trace t;
  for (int i = 0; i < 50; ++i)
    t.push_back({i * 0.01, "m" + std::to_string(i)});
  eval::cluster_options o;
  o.instances = 4;
  o.instance_capacity = 200;
  o.policy = "lru";
  o.placement = placement_rule::warm;
  auto warm = eval::simulate_cluster(t, models, o);
  o.placement = placement_rule::modelmesh;
  auto mesh = eval::simulate_cluster(t, models, o);
  REQUIRE(warm);
  REQUIRE(mesh);
  CHECK(warm->cold_starts == 50);
  CHECK(mesh->cold_starts == 50);
  CHECK(warm->max_share <= 0.35);
  CHECK(warm->max_share == Approx(13.0 / 50));  // one by one: the fewest loads queued
  CHECK(warm->forced == 0);
  CHECK(warm->evictions == 0);
  CHECK(mesh->max_share >= 13.0 / 50);
  CHECK(mesh->wait_ms_total >= warm->wait_ms_total);  // round-robin is the least wait there is
}

TEST_CASE("cluster: claims keep placements apart between two records") {
  // Instant loads (nothing stays in flight) and one record for the whole trace: only the bytes
  // claimed since the record tell the two instances apart. Six models fit three to an instance.
  auto models = models_of(6, 10, 0);
  eval::trace t;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 6; ++i)
      t.push_back({round * 100.0 + i, "m" + std::to_string(i)});
  eval::cluster_options o;
  o.instances = 2;
  o.instance_capacity = 30;
  o.policy = "lru";
  o.record_seconds = 3600;
  auto r = eval::simulate_cluster(t, models, o);
  REQUIRE(r);
  CHECK(r->cold_starts == 6);
  CHECK(r->evictions == 0);
  CHECK(r->max_share == Approx(0.5));
}

TEST_CASE("cluster: warm frees the instance whose model is worth less, ModelMesh the older one") {
  // Two instances of one model each: a, used five times in its first seconds, and b, used twice,
  // the last time later than a. A third model must displace one: warm's rule gives up b (less
  // value by kdf's counts), ModelMesh's the instance with the older cache timestamp, a's, which
  // is then missed again.
  eval::catalog models{{"a", 10, 1000}, {"b", 10, 1000}, {"c", 10, 1000}};
  eval::trace t{{0, "a"}, {0, "b"}};
  for (int i = 0; i < 4; ++i)
    t.push_back({1000.0 + i, "a"});
  t.push_back({5000, "b"});
  t.push_back({10000, "c"});
  t.push_back({10001, "a"});
  eval::cluster_options o;
  o.instances = 2;
  o.instance_capacity = 10;
  o.record_seconds = 0;
  auto warm = eval::simulate_cluster(t, models, o);
  REQUIRE(warm);
  CHECK(warm->cold_starts == 3);
  CHECK(warm->evictions == 1);
  o.placement = placement_rule::modelmesh;
  auto mesh = eval::simulate_cluster(t, models, o);
  REQUIRE(mesh);
  CHECK(mesh->cold_starts == 4);
}

TEST_CASE("cluster: bad input is refused with a clear error") {
  auto models = models_of(2, 10, 1);
  eval::trace t{{0, "m0"}};
  eval::cluster_options o;
  o.instance_capacity = 5;
  auto small = eval::simulate_cluster(t, models, o);
  REQUIRE_FALSE(small);
  CHECK(small.error().message.find("larger than an instance") != std::string::npos);
  o.instance_capacity = 100;
  o.instances = 0;
  CHECK_FALSE(eval::simulate_cluster(t, models, o));
  o.instances = 2;
  o.loading_threads = 0;
  CHECK_FALSE(eval::simulate_cluster(t, models, o));
  o.loading_threads = 1;
  o.policy = "nope";
  CHECK_FALSE(eval::simulate_cluster(t, models, o));
  o.policy = "kdf";
  eval::trace unknown{{0, "zz"}};
  auto missing = eval::simulate_cluster(unknown, models, o);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("'zz'") != std::string::npos);
}

TEST_CASE("cluster: every placement and policy keeps its books on a random trace") {
  auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  eval::catalog models;
  for (int i = 0; i < 40; ++i)
    models.push_back({"m" + std::to_string(i), 10 + rng() % 90, static_cast<double>(rng() % 2000)});
  eval::trace t;
  double now = 0;
  for (int i = 0; i < 3000; ++i) {
    now += static_cast<double>(rng() % 500);
    t.push_back({now, "m" + std::to_string(rng() % 40)});
  }
  for (auto policy : {"kdf", "lru", "gdsf", "s3fifo"})
    for (auto rule : {placement_rule::warm, placement_rule::modelmesh}) {
      eval::cluster_options o;
      o.instances = 1 + rng() % 6;
      o.instance_capacity = 250;
      o.policy = policy;
      o.placement = rule;
      o.record_seconds = static_cast<double>(rng() % 4);
      o.loading_threads = 1 + static_cast<std::uint32_t>(rng() % 2);
      INFO(policy << " " << ranking::to_string(rule) << " instances " << o.instances);
      auto r = eval::simulate_cluster(t, models, o);
      REQUIRE(r);
      CHECK(r->requests == t.size());
      CHECK(r->cold_starts <= r->waited);
      CHECK(r->waited <= r->requests);
      CHECK(r->evictions <= r->cold_starts);  // what is resident at the end was loaded once
      CHECK(r->cold_starts - r->evictions <= models.size());
      CHECK(r->wait_ms_total >= r->load_ms_total - 1e-6);
      CHECK(r->max_share * static_cast<double>(o.instances) >= 1 - 1e-9);
    }
}
