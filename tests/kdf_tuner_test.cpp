// kdf's burst guard, its forgetting of faded counts, and its automatic memory (kdf_tuner): the
// miniature simulations are the fixed-memory kdf run on the same requests, the choice is the one
// that paid least, the sample shrinks as the device grows, costs halve with use.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "policy/kdf_policy.hpp"
#include "policy/kdf_tuner.hpp"

using namespace warm;
using strings = std::vector<std::string>;

namespace {

timestamp at(double seconds) {
  return timestamp{} +
         std::chrono::duration_cast<timestamp::duration>(std::chrono::duration<double>(seconds));
}
bool none(const std::string&) {
  return false;
}

// A kdf with fixed memory 10 and linear value, and (after one victim, idle 100 s when chosen) a
// characteristic time of 100 s: its guard is then 0.03 × 100 s = 3 s.
policy_options memory_10() {
  policy_options o;
  o.kdf_memory = 10;
  return o;
}
void make_characteristic_100s(kdf_policy& p) {
  p.on_insert("first", 100, 1, at(0));
  REQUIRE(p.choose_victims("x", 100, none, at(100)) == strings{"first"});
  p.on_remove("first", true);
  REQUIRE(p.characteristic_time() == Approx(100));
}

struct request {
  std::string model;
  double at;
};

// The tuner's contract for one shadow, written out: a miss pays the load and inserts (evicting
// the policy's victims), a hit is a use. Returns the load seconds paid.
double simulate(kdf_policy& p, std::uint64_t capacity, const std::vector<request>& trace,
                const std::map<std::string, std::uint64_t>& bytes) {
  std::map<std::string, std::uint64_t> resident;
  std::uint64_t used = 0;
  double cost = 0;
  for (auto& r : trace) {
    auto size = bytes.at(r.model);
    if (resident.count(r.model)) {
      p.on_access(r.model, at(r.at), 1);
      continue;
    }
    cost += static_cast<double>(size) / 100;
    if (used + size > capacity) {
      for (auto& v : p.choose_victims(r.model, used + size - capacity, none, at(r.at))) {
        p.on_remove(v, true);
        used -= resident.at(v);
        resident.erase(v);
      }
    }
    p.on_insert(r.model, size, static_cast<double>(size) / 100, at(r.at));
    resident[r.model] = size;
    used += size;
  }
  return cost;
}

}  // namespace

TEST_CASE("kdf passes over a resident in a burst of requests while others can free the bytes") {
  kdf_policy p(memory_10());
  make_characteristic_100s(p);
  p.on_insert("steady", 100, 1, at(900));
  p.on_access("steady", at(950), 4);  // 5 requests: worth more than burst's 1
  p.on_insert("burst", 100, 1, at(1000));
  // burst was used 2.9 s ago (< 3 s): passed over, though it is worth the least.
  CHECK(p.choose_victims("x", 100, none, at(1002.9)) == strings{"steady"});
  // 3.1 s ago: no longer guarded, the least value goes.
  CHECK(p.choose_victims("x", 100, none, at(1003.1)) == strings{"burst"});
  // When the others cannot free the bytes, the busy ones join, least value per byte first.
  p.on_access("burst", at(1010), 1);
  CHECK(p.choose_victims("x", 200, none, at(1011)) == strings{"burst", "steady"});
  p.on_access("steady", at(1011), 1);
  CHECK(p.choose_victims(
            "x", 100, [](const std::string& m) { return m == "steady"; }, at(1011)) ==
        strings{"burst"});
}

TEST_CASE(
    "kdf_tuner: each shadow is the fixed-memory kdf on the same requests; the choice paid least") {
  // Phases of popularity over 60 models of 100-300 bytes: a model hot in one phase goes quiet in
  // the next, so how long requests count decides what the cache keeps.
  const unsigned seed = GENERATE(1u, 2u, 3u);
  std::printf("kdf_tuner_test: seed %u\n", seed);
  std::mt19937 rng(seed);
  std::map<std::string, std::uint64_t> bytes;
  for (int i = 0; i < 60; ++i)
    bytes["m" + std::to_string(i)] = 100 + 100 * static_cast<std::uint64_t>(rng() % 3);
  std::vector<request> trace;
  double t = 0;
  for (int phase = 0; phase < 12; ++phase) {
    int base = static_cast<int>(rng() % 50);
    std::exponential_distribution<double> gap(1.0);
    for (int k = 0; k < 400; ++k) {
      t += gap(rng);
      int m = rng() % 4 != 0 ? base + static_cast<int>(rng() % 10) : static_cast<int>(rng() % 60);
      trace.push_back({"m" + std::to_string(m), t});
    }
  }
  const std::uint64_t capacity = 2000;  // about 10 of the 60
  policy_options o;
  o.capacity = capacity;
  kdf_tuner tuner(o);
  for (auto& r : trace) {
    auto size = bytes.at(r.model);
    tuner.on_request(r.model, size, static_cast<double>(size) / 100, at(r.at), 1);
  }
  auto shadows = tuner.shadows();
  REQUIRE(shadows.size() == std::size(kdf_tuner::memories));
  double least = 1e300;
  for (std::size_t i = 0; i < shadows.size(); ++i) {
    policy_options fixed = o;
    fixed.kdf_memory = kdf_tuner::memories[i];
    kdf_policy reference(fixed);
    CHECK(shadows[i].memory == kdf_tuner::memories[i]);
    CHECK(shadows[i].cost == Approx(simulate(reference, capacity, trace, bytes)));
    least = std::min(least, shadows[i].cost);
  }
  double chosen = 0;
  for (auto& s : shadows)
    if (s.memory == tuner.memory()) chosen = s.cost;
  CHECK(chosen * (1 - kdf_tuner::switch_margin) <= least);
}

TEST_CASE("kdf_tuner: the choice changes only for a shadow that paid switch_margin less") {
  // Two models that never fit together: every request after the first is a miss for all shadows
  // alike, so costs tie and the first memory stays.
  policy_options o;
  o.capacity = 100;
  kdf_tuner tuner(o);
  for (int k = 0; k < 50; ++k)
    tuner.on_request(k % 2 ? "a" : "b", 100, 1, at(k), 1);
  CHECK(tuner.memory() == kdf_tuner::memories[0]);
  for (auto& s : tuner.shadows())
    CHECK(s.cost == 50);
}

// A request that misses a shadow with count n loads the model and counts n uses, no more and no
// fewer: a shadow's kdf then values it at n x its load seconds. Two models of 100 bytes fill a
// 200-byte shadow: "a", asked 3 times at once (load 1 s), and "b", asked once (load `b_seconds`).
// A third evicts the one of lesser value, and a later request for "b" is a hit or a miss.
TEST_CASE("kdf_tuner: a shadow miss with count n records exactly n uses") {
  auto cost_of_b_again = [](double b_seconds) {
    policy_options o;
    o.capacity = 200;
    kdf_tuner tuner(o);
    tuner.on_request("a", 100, 1, at(0), 3);
    tuner.on_request("b", 100, b_seconds, at(1), 1);
    tuner.on_request("c", 100, 1, at(2), 1);  // evicts a (worth 3) or b (worth b_seconds)
    auto before = tuner.shadows();
    for (auto& s : before)
      CHECK(s.cost == Approx(2 + b_seconds));
    tuner.on_request("b", 100, b_seconds, at(3), 1);
    std::vector<double> paid;
    for (std::size_t i = 0; i < before.size(); ++i)
      paid.push_back(tuner.shadows()[i].cost - before[i].cost);
    return paid;
  };
  // b worth 3.5 > 3: a goes, b stays (a hit); worth 2.5 < 3: b goes, and is loaded again.
  for (double paid : cost_of_b_again(3.5))
    CHECK(paid == Approx(0));
  for (double paid : cost_of_b_again(2.5))
    CHECK(paid == Approx(2.5));
}

TEST_CASE("kdf_tuner: costs halve every half_life sampled requests") {
  policy_options o;
  o.capacity = 1000;
  kdf_tuner tuner(o);
  tuner.on_request("a", 100, 2.0, at(0), 1);  // the one miss
  for (std::uint64_t k = 1; k + 1 < kdf_tuner::half_life; ++k)
    tuner.on_request("a", 100, 2.0, at(0.001 * k), 1);
  for (auto& s : tuner.shadows())
    CHECK(s.cost == 2.0);
  tuner.on_request("a", 100, 2.0, at(100), 1);  // the half_life-th
  for (auto& s : tuner.shadows())
    CHECK(s.cost == 1.0);
}

TEST_CASE("kdf_tuner: the sample halves as the device grows past sampled_residents per share") {
  policy_options o;
  o.capacity = 600 * 100;  // exactly the 600 models below
  kdf_tuner tuner(o);
  for (int i = 0; i < 600; ++i)
    tuner.on_request("m" + std::to_string(i), 100, 1, at(i), 1);
  for (auto& s : tuner.shadows())
    CHECK(s.residents == 600);
  tuner.on_residents(kdf_tuner::sampled_residents);  // at the bound: unchanged
  CHECK(tuner.sampled_share() == 1.0);
  tuner.on_residents(kdf_tuner::sampled_residents + 1);
  CHECK(tuner.sampled_share() == 0.5);
  // Exactly the models whose hash is in the lower half stay.
  std::size_t kept = 0;
  for (int i = 0; i < 600; ++i)
    kept += kdf_tuner::hash("m" + std::to_string(i)) >> 63 == 0;
  CHECK(kept > 200);
  CHECK(kept < 400);
  for (auto& s : tuner.shadows())
    CHECK(s.residents == kept);
  // Each shadow now has half the device's bytes: 400 more sampled models of 100 bytes push it
  // to that bound, not past it.
  int added = 0;
  for (int i = 0; added < 400; ++i)
    if (kdf_tuner::hash("n" + std::to_string(i)) >> 63 == 0) {
      tuner.on_request("n" + std::to_string(i), 100, 1, at(700 + added), 1);
      ++added;
    }
  for (auto& s : tuner.shadows())
    CHECK(s.residents == 300);
  tuner.on_residents(4 * kdf_tuner::sampled_residents + 1);  // one halving per call
  CHECK(tuner.sampled_share() == 0.25);
  // An unsampled model costs the shadows nothing.
  std::string outside;
  for (int i = 0; outside.empty(); ++i)
    if (kdf_tuner::hash("u" + std::to_string(i)) >> 62 != 0) outside = "u" + std::to_string(i);
  auto before = tuner.shadows();
  tuner.on_request(outside, 100, 1, at(1000), 1);
  for (std::size_t i = 0; i < before.size(); ++i)
    CHECK(tuner.shadows()[i].cost == before[i].cost);
}

TEST_CASE("kdf_tuner's hash is fixed (FNV-1a, mixed), so a sample is the same on every build") {
  CHECK(kdf_tuner::hash("") == 0x4f43b61ebe0f3fa7ull);
  CHECK(kdf_tuner::hash("m0") == 0x713089d53ab513c8ull);
  CHECK(kdf_tuner::hash("resnet50") == 0x402c8342cea5d118ull);
}

TEST_CASE("kdf's memory is the tuner's choice unless the memory or tau is fixed") {
  policy_options o;
  o.capacity = 1000;
  kdf_policy automatic(o);
  REQUIRE(automatic.tuner() != nullptr);
  CHECK(automatic.memory() == kdf_tuner::memories[0]);
  automatic.on_insert("a", 100, 1, at(0));
  REQUIRE(automatic.choose_victims("x", 100, none, at(50)) == strings{"a"});
  automatic.on_remove("a", true);
  CHECK(automatic.tau() == Approx(automatic.tuner()->memory() * 50));
  policy_options fixed_memory = o;
  fixed_memory.kdf_memory = 30;
  CHECK(kdf_policy(fixed_memory).tuner() == nullptr);
  CHECK(kdf_policy(fixed_memory).memory() == 30);
  policy_options fixed_tau = o;
  fixed_tau.kdf_tau = std::chrono::seconds(600);
  CHECK(kdf_policy(fixed_tau).tuner() == nullptr);
}

TEST_CASE("kdf forgets the counts of models gone long enough to have faded, not of residents") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(100);  // a count of 1 fades below 0.01 after 461 s
  kdf_policy p(o);
  p.on_insert("old", 100, 1, at(0));
  p.on_remove("old", true);
  p.on_insert("recent", 100, 1, at(400));
  p.on_remove("recent", true);
  p.on_insert("resident", 100, 1, at(0));  // resident throughout, never used again
  CHECK(p.remembered("old").count == Approx(1));
  // Many models come and go at t = 500: the counts outgrow 1,024 and a pass forgets what faded.
  for (int i = 0; i < 1100; ++i) {
    auto m = "m" + std::to_string(i);
    p.on_insert(m, 1, 1, at(500));
    p.on_remove(m, true);
  }
  CHECK(p.remembered("old").count == 0);               // e^-5 < 0.01: forgotten
  CHECK(p.remembered("recent").count == Approx(1));    // e^-1 at t = 500: kept
  CHECK(p.remembered("resident").count == Approx(1));  // a resident's count stays, faded or not
  CHECK(p.size() == 1);
  CHECK(p.choose_victims("x", 100, none, at(600)) == strings{"resident"});
}

// kdf's index migration against a kdf keyed under the new τ from the start. Every model is first
// requested once at one instant, so orders under the old and the new τ agree until models are used
// again: until the drift both choose alike, from then on the migrating kdf must free the bytes for
// no more value than one rebuilt at once, keep its order and values the same while models are
// evicted, used, unloaded and loaded mid-migration, lose or duplicate none, and end its migration
// within residents / migration_step decisions.
TEST_CASE(
    "kdf migrates its index to a new tau a step per decision, choosing as if rebuilt at once") {
  const unsigned seed = GENERATE(1u, 2u);
  std::printf("kdf_tuner_test: migration seed %u\n", seed);
  std::mt19937 rng(seed);
  policy_options o;
  o.kdf_memory = 10;
  kdf_policy p(o);
  p.share_time_scale(120);  // τ = 1200 s, as its index keys: nothing to migrate
  REQUIRE(p.tau() == kdf_policy::initial_tau);
  policy_options fixed;
  fixed.kdf_tau = std::chrono::seconds(600);
  kdf_policy reference(fixed);     // keyed under 600 s from the start
  reference.share_time_scale(60);  // the same burst guard: 1.8 s
  p.share_time_scale(60);          // τ = 600 s: halved, a migration is due after n/4 decisions
  REQUIRE(p.tau() == 600);
  std::map<std::string, std::uint64_t> resident;
  int next = 0;
  auto load = [&](double t) {
    auto model = "m" + std::to_string(next++);
    auto bytes = 1 + rng() % 100;
    double seconds = std::uniform_real_distribution<double>(0.01, 1)(rng);
    auto uses = t > 50 ? rng() % 5 : 0;  // the first ones requested once: none stale
    for (kdf_policy* q : {&p, &reference}) {
      q->on_insert(model, bytes, seconds, at(t));
      if (uses > 0) q->on_access(model, at(t), uses);
    }
    resident[model] = bytes;
  };
  auto pick = [&] {
    auto it = resident.begin();
    std::advance(it, static_cast<long>(rng() % resident.size()));
    return it->first;
  };
  // `mine` frees `bytes` with distinct residents for no more value than `theirs`.
  auto no_dearer = [&](const strings& mine, const strings& theirs, std::uint64_t bytes, double t) {
    std::map<std::string, double> value;
    for (auto& r : reference.eviction_order(at(t)))
      value[r.model] = r.score;
    double paid = 0, reference_paid = 0;
    std::uint64_t freed = 0;
    for (auto& m : mine) {
      REQUIRE(resident.count(m) == 1);
      freed += resident[m];
      paid += value[m];
    }
    for (auto& m : theirs)
      reference_paid += value[m];
    CHECK(std::set<std::string>(mine.begin(), mine.end()).size() == mine.size());
    CHECK(freed >= bytes);
    CHECK(paid <= reference_paid * (1 + 1e-12));
  };
  const std::size_t n = 3 * kdf_policy::migration_step + 100;
  for (std::size_t i = 0; i < n; ++i)
    load(50);
  // The residents in the order a kdf rebuilt at once gives, each with its value.
  auto same_order = [&](double t) {
    auto mine = p.eviction_order(at(t)), theirs = reference.eviction_order(at(t));
    REQUIRE(mine.size() == theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      CHECK(mine[i].model == theirs[i].model);
      CHECK(mine[i].score == theirs[i].score);
    }
  };

  double t = 100;
  std::size_t decisions = 0, started = 0, bound = 0;
  for (; decisions < n; ++decisions, t += 2) {
    auto bytes = 1 + rng() % 200;
    auto victims = p.choose_victims("x", bytes, none, at(t));
    auto theirs = reference.choose_victims("x", bytes, none, at(t));
    if (started == 0 && p.migrating() == 0) {
      REQUIRE(victims == theirs);
      continue;  // not yet migrating: a choice changes nothing
    }
    // During the migration a search may look at more candidates than the reference's (its budget
    // of entries looked at counts used models met in either index, not the same ones): what it
    // evicts frees the bytes for no more value. Both then evict these.
    no_dearer(victims, theirs, bytes, t);
    if (started == 0) {
      started = decisions + 1;
      CHECK(started == (n + kdf_policy::rebuild_spacing - 1) / kdf_policy::rebuild_spacing);
      CHECK(p.migrating() == n - kdf_policy::migration_step);  // the first step moved
      bound = (n + kdf_policy::migration_step - 1) / kdf_policy::migration_step;
      // The models the first two steps move become the most valuable: what is cheapest then
      // waits among the entries not yet moved.
      auto order = reference.eviction_order(at(t));
      for (std::size_t i = 0; i < 2 * kdf_policy::migration_step; ++i) {
        p.on_access(order[i].model, at(t), 100);
        reference.on_access(order[i].model, at(t), 100);
      }
    }
    for (auto& v : victims) {
      p.on_remove(v, true);
      reference.on_remove(v, true);
      resident.erase(v);
    }
    for (int k = 0; k < 3; ++k) {
      auto used = pick();
      p.on_access(used, at(t), 1);
      reference.on_access(used, at(t), 1);
    }
    auto unloaded = pick();
    p.on_remove(unloaded, false);
    reference.on_remove(unloaded, false);
    resident.erase(unloaded);
    load(t);
    CHECK(p.size() == resident.size());
    same_order(t);
    if (p.migrating() == 0) break;
  }
  REQUIRE(started > 0);
  CHECK(p.migrating() == 0);
  CHECK(decisions + 2 - started <= bound);  // ended within n / migration_step decisions
  // A few more choices alike, then every byte: each resident exactly once.
  for (int k = 0; k < 20; ++k, t += 2) {
    auto bytes = 1 + rng() % 200;
    no_dearer(p.choose_victims("x", bytes, none, at(t)),
              reference.choose_victims("x", bytes, none, at(t)), bytes, t);
  }
  std::uint64_t all = 0;
  for (auto& [model, bytes] : resident)
    all += bytes;
  auto victims = p.choose_victims("x", all, none, at(t));
  std::sort(victims.begin(), victims.end());
  strings models;
  for (auto& [model, bytes] : resident)
    models.push_back(model);
  CHECK(victims == models);
  CHECK(p.size() == resident.size());
}

// kdf's map of counts never rehashes every count in one call: when full it regrows, moving
// regrowth_step counts per call into a map with room for twice as many. Meanwhile every count is
// found (a use raises it, remember merges into it, a model loaded again takes it up), none is
// lost or doubled, residents' counts (pointers into the maps) stay theirs, and a regrowth moves
// exactly regrowth_step counts per call, so it ends within its counts / regrowth_step calls.
TEST_CASE("kdf's map of counts regrows regrowth_step counts per call, losing and doubling none") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(1000000000);  // nothing fades in this test: every count stays
  kdf_policy p(o);
  std::map<std::string, double> expected;  // every model seen → its count
  std::vector<std::string> residents, departed;
  for (int i = 0; i < 100; ++i) {
    residents.push_back("r" + std::to_string(i));
    p.on_insert(residents.back(), 10, 1, at(1));
    expected[residents.back()] = 1;
  }
  std::mt19937 rng(7);
  auto any = [&](std::vector<std::string>& v) -> std::string& { return v[rng() % v.size()]; };
  auto check_all = [&] {
    for (auto& [model, count] : expected)
      REQUIRE(p.remembered(model).count == Approx(count));
    REQUIRE(p.remembered_models() == expected.size());
  };
  // Runs `call` (which looks up or adds one count; `expected` already holds what it makes) and
  // checks the regrowth's step.
  std::size_t regrowths = 0, halfway = 0;
  auto stepped = [&](auto call) {
    std::size_t before = p.regrowing(), total = p.remembered_models();
    call();
    std::size_t after = p.regrowing();
    if (before == 0 && after > 0) {
      ++regrowths;  // started: every count but the one just added waits to move
      CHECK(after == total);
      halfway = after / 2;
    } else {
      CHECK(after == (before > kdf_policy::regrowth_step ? before - kdf_policy::regrowth_step : 0));
    }
    if (halfway > 0 && after <= halfway) {
      check_all();  // half of the counts moved, half not
      halfway = 0;
    }
  };
  for (int i = 0; i < 12000; ++i) {
    auto model = "d" + std::to_string(i);
    auto k = 1 + rng() % 3;
    expected[model] += static_cast<double>(k);
    stepped([&] { p.on_access(model, at(1), k); });
    departed.push_back(model);
    if (p.regrowing() == 0) continue;
    switch (rng() % 4) {
      case 0: {  // a departed model, moved or not, is requested again
        auto& m = any(departed);
        expected[m] += 2;
        stepped([&] { p.on_access(m, at(1), 2); });
        break;
      }
      case 1: {  // another kdf's memory of a departed model: the larger count stays
        auto& m = any(departed);
        expected[m] += 1;
        stepped([&] { p.remember(m, {expected[m], at(1)}); });
        break;
      }
      case 2: {  // a resident is evicted (its count remembered) and a departed model loaded
        auto& r = any(residents);
        p.on_remove(r, true);
        auto& m = any(departed);
        expected[m] += 1;
        stepped([&] { p.on_insert(m, 10, 1, at(1)); });
        std::swap(r, m);
        break;
      }
      default: {  // a resident is used: through its pointer into whichever map holds its count
        auto& r = any(residents);
        p.on_access(r, at(1), 3);
        expected[r] += 3;
      }
    }
  }
  CHECK(regrowths >= 3);
  check_all();
  // The residents' values are their counts (load time 1 s): their pointers are their own.
  auto order = p.eviction_order(at(1));
  REQUIRE(order.size() == residents.size());
  for (auto& r : order)
    CHECK(r.score == Approx(expected[r.model]));
}

// The forgetting sweep goes on across a regrowth: counts that faded before they moved are
// forgotten as they move or by the sweep in the new map; residents' counts and recent ones stay.
TEST_CASE("kdf's forgetting sweep forgets faded counts across a regrowth of its map of counts") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(100);  // a count of 1 fades below 0.01 after 461 s
  kdf_policy p(o);
  p.on_insert("resident", 100, 1, at(0));  // resident throughout, never used again
  p.on_access("recent", at(450), 1);       // e^-0.5 at t = 500: kept
  // Models requested once at t = 0 until the map of counts is full and a regrowth starts.
  int old = 0;
  while (old <= 1000 || p.regrowing() == 0)
    p.on_access("old" + std::to_string(old++), at(0), 1);
  REQUIRE(old > 1000);
  // At t = 500 every one of them has faded. Models come and go (on_insert, sweeping four counts
  // each): within two sweeps' worth of inserts every faded count is gone.
  const int inserts = 2 * (old + 100) / static_cast<int>(kdf_policy::forget_step);
  for (int i = 0; i < inserts; ++i) {
    auto m = "m" + std::to_string(i);
    p.on_insert(m, 1, 1, at(500));
    p.on_remove(m, true);
  }
  CHECK(p.regrowing() == 0);
  for (int i = 0; i < old; ++i)
    REQUIRE(p.remembered("old" + std::to_string(i)).count == 0);
  CHECK(p.remembered("recent").count == Approx(1));  // as of its request
  CHECK(p.remembered("resident").count == Approx(1));
  CHECK(p.remembered_models() == 2 + static_cast<std::size_t>(inserts));
  CHECK(p.choose_victims("x", 100, none, at(600)) == strings{"resident"});
}

// A search that meets thousands of entries used since they were keyed re-keys at most
// max_rekeyed of them and looks at a bounded number, yet frees the bytes; the next decisions
// re-key the rest, and within used / max_rekeyed decisions the search reaches the cheapest again.
TEST_CASE(
    "a kdf search re-keys at most max_rekeyed used entries, looks at a bounded number, "
    "and frees the bytes") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(1000000000);
  kdf_policy p(o);
  // 5,000 models of 100 bytes used twice (value 2) and 100 of 60 bytes used once (value 1), all
  // loaded at t = 0: the used ones' keys (as loaded, before their second use) are the lowest, and
  // their keys anew (twice as high) lie above the others'.
  const int used = 5000;
  std::map<std::string, std::uint64_t> bytes;
  for (int i = 0; i < used; ++i)
    p.on_insert(bytes.emplace("u" + std::to_string(i), 100).first->first, 100, 1, at(0));
  for (int i = 0; i < 100; ++i)
    p.on_insert(bytes.emplace("c" + std::to_string(i), 60).first->first, 60, 1, at(0));
  for (int i = 0; i < used; ++i)
    p.on_access("u" + std::to_string(i), at(1), 1);
  int decisions = 0;
  for (double t = 2;; t += 1, ++decisions) {
    REQUIRE(decisions <= used / static_cast<int>(kdf_policy::max_rekeyed) + 2);
    auto victims = p.choose_victims("x", 50, none, at(t));
    auto work = p.last_search();
    CHECK(work.rekeyed <= kdf_policy::max_rekeyed);
    CHECK(work.looked_at <= kdf_policy::pass_limit + kdf_policy::max_candidates);
    std::uint64_t freed = 0;
    for (auto& v : victims) {
      REQUIRE(bytes.count(v) == 1);
      freed += bytes[v];
    }
    CHECK(std::set<std::string>(victims.begin(), victims.end()).size() == victims.size());
    CHECK(freed >= 50);
    if (victims.size() == 1 && victims[0][0] == 'c') break;  // the cheapest: value 1
    for (auto& v : victims) {
      p.on_remove(v, true);
      bytes.erase(v);
    }
  }
  CHECK(decisions >= 1);  // the first search did not re-key all 5,000 to reach the cheapest
}
