// Every policy on hand-made access sequences with known victim orders, IAM's ranks against the
// formula, and its shadow-heap swap.
#include <catch2/catch.hpp>

#include <cmath>

#include "policy/arc_policy.hpp"
#include "policy/gdsf_policy.hpp"
#include "policy/expert_policy.hpp"
#include "policy/iam_policy.hpp"
#include "policy/kdf_policy.hpp"
#include "policy/lfu_policy.hpp"
#include "policy/load_penalty.hpp"
#include "policy/lru_policy.hpp"
#include "policy/srrip_policy.hpp"

using namespace warm;
using namespace std::chrono_literals;
using strings = std::vector<std::string>;

namespace {

timestamp at(double seconds) {
  return timestamp{} + std::chrono::duration_cast<timestamp::duration>(std::chrono::duration<double>(seconds));
}
bool none(const std::string&) { return false; }
pinned_fn only(std::string model) {
  return [model](const std::string& m) { return m == model; };
}

}  // namespace

TEST_CASE("lru evicts the least recently used until the bytes fit") {
  lru_policy p;
  p.on_insert("a", 100, 1, at(1));
  p.on_insert("b", 100, 1, at(2));
  p.on_insert("c", 100, 1, at(3));
  p.on_access("a", at(4), 1);
  CHECK(p.choose_victims("x", 150, none, at(5)) == strings{"b", "c"});
  CHECK(p.choose_victims("x", 150, only("b"), at(5)) == strings{"c", "a"});
  CHECK(p.choose_victims("x", 301, none, at(5)).empty());  // cannot free enough
  CHECK(p.choose_victims("x", 300, only("a"), at(5)).empty());
  p.on_remove("b", true);
  CHECK(p.choose_victims("x", 100, none, at(5)) == strings{"c"});
  CHECK(p.size() == 2);
}

TEST_CASE("lru places an access reported late by when it happened, not when it arrived") {
  // The device actor reports hit-path accesses at its next look, possibly after a later insert.
  lru_policy p;
  p.on_insert("a", 100, 1, at(1));
  p.on_insert("b", 100, 1, at(3));
  p.on_access("a", at(2), 1);  // happened before b arrived
  CHECK(p.choose_victims("x", 100, none, at(4)) == strings{"a"});
  p.on_access("a", at(1.5), 1);  // older than what is known: no change
  CHECK(p.choose_victims("x", 100, none, at(4)) == strings{"a"});
  p.on_access("a", at(5), 1);
  CHECK(p.choose_victims("x", 100, none, at(6)) == strings{"b"});
}

TEST_CASE("lru ignores a late-reported access older than the one it knows") {
  // a was used at 5, after b arrived; an access at 1.5 reported afterwards must not move a
  // behind b, or a recent model would be evicted before an idle one.
  lru_policy p;
  p.on_insert("a", 100, 1, at(1));
  p.on_insert("b", 100, 1, at(2));
  p.on_access("a", at(5), 1);
  CHECK(p.choose_victims("x", 100, none, at(6)) == strings{"b"});
  p.on_access("a", at(1.5), 1);
  CHECK(p.choose_victims("x", 100, none, at(6)) == strings{"b"});
  auto order = p.eviction_order(at(6));
  REQUIRE(order.size() == 2);
  CHECK(order[0].model == "b");
  CHECK(order[1].model == "a");
  CHECK(order[1].score == Approx(1.0));  // idle since 5, not since 1.5
}

TEST_CASE("lfu evicts the fewest requests since (re)load, ties least recently used") {
  lfu_policy p;
  for (auto m : {"a", "b", "c"}) p.on_insert(m, 100, 1, at(0));
  p.on_access("a", at(1), 3);
  p.on_access("c", at(2), 2);
  p.on_access("b", at(3), 1);
  CHECK(p.choose_victims("x", 100, none, at(4)) == strings{"b"});
  CHECK(p.choose_victims("x", 200, none, at(4)) == strings{"b", "c"});
  p.on_access("b", at(5), 1);  // b: 2 requests, used after c: c goes first
  CHECK(p.choose_victims("x", 100, none, at(6)) == strings{"c"});
  p.on_insert("d", 100, 1, at(7));
  p.on_insert("e", 100, 1, at(8));
  CHECK(p.choose_victims("x", 200, none, at(9)) == strings{"d", "e"});  // both 0: older first
  p.on_remove("a", true);
  p.on_insert("a", 100, 1, at(10));  // reloaded: its count starts again
  CHECK(p.choose_victims("x", 300, none, at(11)) == strings{"d", "e", "a"});
}

TEST_CASE("ranked policies skip pinned models, and give up when the unpinned cannot free enough") {
  lfu_policy p;  // ranked_set: the same code ranks LFU, GDSF and IAM's fresh inserts
  for (auto m : {"a", "b", "c"}) p.on_insert(m, 100, 1, at(0));
  CHECK(p.choose_victims("x", 100, none, at(1)) == strings{"a"});
  CHECK(p.choose_victims("x", 100, only("a"), at(1)) == strings{"b"});
  CHECK(p.choose_victims("x", 200, only("b"), at(1)) == strings{"a", "c"});
  CHECK(p.choose_victims("x", 300, only("c"), at(1)).empty());
}

TEST_CASE("srrip inserts long, promotes hits to near, ages until a distant victim appears") {
  srrip_policy p;
  for (auto m : {"a", "b", "c"}) p.on_insert(m, 100, 1, at(0));
  CHECK(p.rrpv("a") == 2);
  p.on_access("b", at(1), 1);
  CHECK(p.rrpv("b") == 0);
  CHECK(p.choose_victims("x", 100, none, at(2)) == strings{"a"});  // one round of aging
  CHECK(p.rrpv("a") == 3);
  CHECK(p.rrpv("b") == 1);
  CHECK(p.rrpv("c") == 3);
  CHECK(p.choose_victims("x", 200, only("a"), at(2)) == strings{"c", "b"});
  CHECK(p.rrpv("b") == 3);
  CHECK(p.choose_victims("x", 400, none, at(2)).empty());
}

TEST_CASE("srrip never ages a pinned model") {
  srrip_policy p;
  for (auto m : {"a", "b"}) p.on_insert(m, 100, 1, at(0));
  p.on_access("a", at(1), 1);
  p.on_access("b", at(1), 1);
  // Both near (0): aging runs three rounds before b is distant; pinned a must stay at 0.
  CHECK(p.choose_victims("x", 100, only("a"), at(2)) == strings{"b"});
  CHECK(p.rrpv("a") == 0);
  CHECK(p.rrpv("b") == 3);
}

TEST_CASE("gdsf ranks by L + frequency x penalty / size and inflates L on eviction") {
  gdsf_policy p;
  p.on_insert("a", 100, 1, at(0));  // the load counts as the first request
  p.on_insert("b", 100, 2, at(0));
  p.on_insert("c", 200, 2, at(0));
  CHECK(p.priority("a") == Approx(0.01));
  for (auto m : {"a", "b", "c"}) p.on_access(m, at(1), 1);
  CHECK(p.priority("a") == Approx(0.02));
  CHECK(p.priority("b") == Approx(0.04));
  CHECK(p.priority("c") == Approx(0.02));
  CHECK(p.choose_victims("x", 100, none, at(2)) == strings{"a"});  // tie with c: keyed first
  p.on_remove("a", true);
  CHECK(p.inflation() == Approx(0.02));
  p.on_insert("d", 100, 1, at(3));
  CHECK(p.priority("d") == Approx(0.03));  // L + 1 x 1 s / 100 B
  p.on_access("d", at(3), 1);
  CHECK(p.priority("d") == Approx(0.04));
  CHECK(p.choose_victims("x", 300, none, at(4)) == strings{"c", "b"});  // b keyed before d
  p.on_remove("b", false);  // unregistered: no inflation
  CHECK(p.inflation() == Approx(0.02));
}

TEST_CASE("arc keeps seen-twice models, remembers evictions as ghosts and adapts p in bytes") {
  arc_policy p(400);
  p.on_insert("a", 100, 1, at(0));
  p.on_insert("b", 100, 1, at(1));
  p.on_access("a", at(2), 1);  // a seen again: T2
  CHECK(p.where("a") == arc_policy::t2);
  CHECK(p.where("b") == arc_policy::t1);
  p.on_insert("c", 100, 1, at(3));
  CHECK(p.target() == 0);
  CHECK(p.choose_victims("x", 100, none, at(4)) == strings{"b"});  // T1 (200 B) is over p = 0
  p.on_remove("b", true);
  CHECK(p.where("b") == arc_policy::b1);
  p.on_insert("x", 100, 1, at(4));
  // b comes back: a B1 hit would raise p to 100; T1 (x, c: 200 B) is still over it.
  CHECK(p.choose_victims("b", 100, none, at(5)) == strings{"c"});
  p.on_remove("c", true);
  p.on_insert("b", 100, 1, at(5));
  CHECK(p.target() == Approx(100));
  CHECK(p.where("b") == arc_policy::t2);  // a ghost hit enters T2
  CHECK(p.where("c") == arc_policy::b1);
  // T1 holds x (100 B) = p: now T2's least recent goes first.
  CHECK(p.choose_victims("y", 100, none, at(6)) == strings{"a"});
  CHECK(p.choose_victims("y", 300, none, at(6)).size() == 3);
  CHECK(p.choose_victims("y", 300, only("a"), at(6)).empty());
  CHECK(p.bytes_in(arc_policy::b1) == 100);
}

TEST_CASE("arc follows a capacity that changes: p stays within it, ghosts are trimmed to it") {
  arc_policy p(400);
  p.on_insert("a", 100, 1, at(0));
  p.on_insert("b", 100, 1, at(1));
  p.on_insert("c", 100, 1, at(2));
  CHECK(p.choose_victims("x", 100, none, at(3)) == strings{"a"});
  p.on_remove("a", true);
  p.on_insert("x", 100, 1, at(3));
  CHECK(p.choose_victims("a", 100, none, at(4)) == strings{"b"});  // a B1 hit raises p
  p.on_remove("b", true);
  p.on_insert("a", 100, 1, at(4));
  REQUIRE(p.target() == Approx(100));
  CHECK(p.where("b") == arc_policy::b1);
  p.set_capacity(50);  // a model runtime reported less
  CHECK(p.target() == Approx(50));
  // The next insert trims ghosts to the new size: B1 may not hold T1 + B1 over 50 bytes.
  p.on_remove("c", true);
  p.on_insert("y", 10, 1, at(5));
  CHECK(p.bytes_in(arc_policy::b1) == 0);
}

TEST_CASE("sieve: the hand passes visited models once, evicts the first unvisited one and stays there") {
  auto made = make_policy("sieve", {});
  REQUIRE(made);
  auto& p = **made;
  for (const char* m : {"a", "b", "c", "d", "e"}) p.on_insert(m, 100, 1, at(0));  // a oldest
  p.on_access("a", at(1), 1);
  p.on_access("c", at(1), 1);
  // The hand starts at the oldest: a is visited (its bit cleared), b is not.
  CHECK(p.choose_victims("x", 100, none, at(2)) == strings{"b"});
  p.on_remove("b", true);
  p.on_insert("x", 100, 1, at(2));
  // The hand stays past b: c (visited) is passed, d goes; a, passed once already, is not next.
  CHECK(p.choose_victims("y", 100, none, at(3)) == strings{"d"});
  p.on_remove("d", true);
  p.on_insert("y", 100, 1, at(3));
  p.on_access("e", at(4), 1);
  // e is passed (visited), then x and y, new and unvisited, go before a and c come round again.
  CHECK(p.choose_victims("z", 200, none, at(5)) == strings{"x", "y"});
  // A pinned model is passed over with its bit kept; too little unpinned room: nothing, no change.
  auto order = p.eviction_order(at(5));
  CHECK(p.choose_victims("z", 600, none, at(5)).empty());
  CHECK(p.eviction_order(at(5)).size() == order.size());
  CHECK(p.choose_victims("z", 100, only("x"), at(5)) == strings{"y"});
  // Every model visited: the hand clears them all in one round and evicts where it started.
  for (const char* m : {"a", "c", "e", "x", "y"}) p.on_access(m, at(6), 1);
  CHECK(p.choose_victims("z", 100, none, at(6)) == strings{"y"});
}

TEST_CASE("importance ranks follow the formula") {
  std::vector<score_input> inputs{{"a", 100, 1.0, 1.0}, {"b", 100, 2.0, 1.0}, {"c", 100, 1.0, 0.5}, {"d", 200, 2.0, 0.5}};
  auto heap = build_importance_heap(inputs, 2.0, at(0));
  REQUIRE(heap->entries.size() == 4);
  // utilities: a 0.01, b 0.02, c 0.005, d 0.005 → c and d tie at the bottom
  CHECK(heap->entries[0].model == "c");
  CHECK(heap->entries[1].model == "d");
  CHECK(heap->entries[2].model == "a");
  CHECK(heap->entries[3].model == "b");
  CHECK(heap->entries[0].rank == Approx(std::log(0 + 2.0)));
  CHECK(heap->entries[1].rank == Approx(std::log(0 + 2.0)));  // d is not above c
  CHECK(heap->entries[2].rank == Approx(std::log(2 + 2.0)));
  CHECK(heap->entries[3].rank == Approx(std::log(3 + 2.0)));
  CHECK(heap->rank_of(0.015, 2.0) == Approx(std::log(3 + 2.0)));
  CHECK(heap->rank_of(0.001, 2.0) == Approx(std::log(2.0)));
}

TEST_CASE("iam evicts from its live heap until a rebuilt one is swapped in") {
  policy_options o;
  o.iam_rate = "window";
  o.rate_window = 10s;
  o.rescore_period = 0s;  // the test plays the scorer
  iam_policy p(o);
  p.on_insert("a", 100, 1, at(0));
  p.on_insert("b", 100, 1, at(0));
  p.on_access("a", at(1), 5);
  p.on_access("b", at(1), 1);
  p.swap_scores(build_importance_heap(p.score_inputs(at(2)), p.bias(), at(2)));
  CHECK(p.live().entries.front().model == "b");
  CHECK(p.choose_victims("x", 100, none, at(3)) == strings{"b"});

  // Traffic flips, but the live heap still decides until the next swap.
  p.on_access("b", at(4), 50);
  CHECK(p.rate("b", at(4)) == Approx(5.2));  // (1 load + 1 + 50) / 10 s
  CHECK(p.choose_victims("x", 100, none, at(5)) == strings{"b"});
  p.swap_scores(build_importance_heap(p.score_inputs(at(5)), p.bias(), at(5)));
  CHECK(p.choose_victims("x", 100, none, at(5)) == strings{"a"});
  CHECK(p.choose_victims("x", 100, only("a"), at(5)) == strings{"b"});

  // A model inserted between rebuilds is ranked at insertion against the live heap.
  p.on_access("c", at(5), 100);  // busy before it was ever loaded
  p.on_insert("c", 100, 1, at(5));
  CHECK(p.choose_victims("x", 200, none, at(6)) == strings{"a", "b"});
  p.on_remove("a", true);
  CHECK(p.choose_victims("x", 200, none, at(6)) == strings{"b", "c"});
}

TEST_CASE("iam rebuilds by itself every rescore_period when nothing drives it") {
  policy_options o;
  o.iam_rate = "window";
  o.rate_window = 10s;
  o.rescore_period = 1s;
  iam_policy p(o);
  p.on_insert("a", 100, 1, at(0));
  p.on_insert("b", 100, 1, at(0));
  p.on_access("b", at(0.5), 9);
  CHECK(p.choose_victims("x", 100, none, at(2)) == strings{"a"});
  CHECK(p.live().built == at(2));
  p.on_access("a", at(2.5), 30);
  CHECK(p.choose_victims("x", 100, none, at(2.5)) == strings{"a"});  // within the period
  CHECK(p.choose_victims("x", 100, none, at(3)) == strings{"b"});
}

TEST_CASE("make_policy knows every policy by name and refuses others") {
  for (auto& name : policy_names()) {
    auto p = make_policy(name, {});
    REQUIRE(p);
    CHECK((*p)->name() == name);
  }
  CHECK(make_policy("mru").error().code == errc::invalid_argument);
  policy_options bad;
  bad.iam_rate = "median";
  CHECK_FALSE(make_policy("iam", bad));
}

TEST_CASE("kdf evicts the least total value that frees the bytes, not the least dense models") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(0);  // plain counts, linear value: value = requests x load s
  o.kdf_horizon = 0;
  auto made = make_policy("kdf", o);
  REQUIRE(made);
  auto& p = **made;
  // Two small dense models and one large model worth less in total.
  p.on_insert("small1", 100, 1.0, at(0));
  p.on_insert("small2", 100, 1.0, at(0));
  p.on_insert("large", 300, 2.5, at(0));
  p.on_access("small1", at(1), 1);  // small1: 2 requests x 1 s = 2; small2: 1 x 1 = 1; large: 1 x 2.5
  // 200 bytes: greedy by value per byte takes small2 (0.01/B) then small1 (0.02/B) = value 3;
  // the large model alone frees 300 for value 2.5.
  CHECK(p.choose_victims("x", 200, none, at(2)) == strings{"large"});
  CHECK(p.choose_victims("x", 100, none, at(2)) == strings{"small2"});
  CHECK(p.choose_victims("x", 200, only("large"), at(2)) == strings{"small2", "small1"});
  p.on_remove("large", true);
  p.on_insert("large", 300, 2.5, at(3));  // reloaded: its count remembers the earlier request
  CHECK(p.choose_victims("x", 350, only("small2"), at(3)) == strings{"small1", "large"});
}

TEST_CASE("kdf past its exact limit: greedy by least value per byte, or one model that frees enough for less") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(0);
  o.kdf_horizon = 0;
  auto made = make_policy("kdf", o);
  REQUIRE(made);
  auto& p = **made;
  // 20 models of 100 bytes (more than the exact knapsack takes): m<i> is worth i + 1.
  for (int i = 0; i < 20; ++i) {
    auto m = "m" + std::to_string(i);
    p.on_insert(m, 100, 1.0, at(0));
    if (i > 0) p.on_access(m, at(1), static_cast<std::uint64_t>(i));
  }
  CHECK(p.choose_victims("x", 300, none, at(2)) == strings{"m0", "m1", "m2"});  // worth 6
  CHECK(p.choose_victims("x", 300, only("m1"), at(2)) == strings{"m0", "m2", "m3"});
  p.on_insert("big", 400, 5.0, at(2));  // frees 400 alone, worth 5 < 6
  CHECK(p.choose_victims("x", 300, none, at(3)) == strings{"big"});
}

TEST_CASE("kdf's counts decay with tau and its value saturates with h") {
  policy_options o;
  o.kdf_tau = std::chrono::seconds(100);
  o.kdf_horizon = 0;
  kdf_policy decaying(o);
  decaying.on_insert("old", 100, 1, at(0));
  decaying.on_access("old", at(0), 9);   // 10 requests at t=0 → e^-3 · 10 ≈ 0.5 at t=300
  decaying.on_insert("new", 100, 1, at(299));
  CHECK(decaying.choose_victims("x", 100, none, at(300)) == strings{"old"});

  o.kdf_tau = std::chrono::seconds(0);
  o.kdf_horizon = 0.5;
  kdf_policy saturating(o);
  saturating.on_insert("hot", 100, 1.0, at(0));
  saturating.on_access("hot", at(0), 99);  // 100 requests: value → 1 − e^-50 ≈ 1 s
  saturating.on_insert("cold", 100, 2.0, at(0));  // 1 request: value (1 − e^-0.5) · 2 ≈ 0.79 s
  CHECK(saturating.choose_victims("x", 100, none, at(1)) == strings{"cold"});
  saturating.on_access("cold", at(1), 2);  // 3 requests: (1 − e^-1.5) · 2 ≈ 1.55 s > hot's 1 s
  CHECK(saturating.choose_victims("x", 100, none, at(1)) == strings{"hot"});
}

TEST_CASE("kdf-adaptive follows the expert whose shadow cache missed least") {
  policy_options o;
  o.capacity = 200;
  o.kdf_window = std::chrono::seconds(1000);
  expert_policy p(o, expert_policy::default_experts(o));
  CHECK(p.name() == "kdf-adaptive");
  // A cyclic pattern over three models where only counting without decay keeps the right ones
  // would be long to build by hand; check the mechanics instead: every expert sees every request
  // and the leader is a known expert label that stays put without new misses.
  for (int round = 0; round < 20; ++round)
    for (auto m : {"a", "b", "c"}) {
      auto now = at(round * 10.0 + (m[0] - 'a'));
      if (round == 0)
        p.on_insert(m, 100, 1, now);
      else
        p.on_access(m, now, 1);
    }
  auto leader = p.leader(at(300));
  CHECK(leader.rfind("kdf(", 0) == 0);
  CHECK(p.leader(at(300)) == leader);
  CHECK(p.choose_victims("d", 100, none, at(300)).size() == 1);
}

TEST_CASE("eviction_order lists every resident, next victim first, and changes nothing") {
  for (auto& name : policy_names()) {
    INFO(name);
    policy_options o;
    o.capacity = 1000;
    o.rescore_period = std::chrono::seconds(0);
    auto made = make_policy(name, o);
    REQUIRE(made);
    auto& p = **made;
    p.on_insert("a", 100, 1, at(0));
    p.on_insert("b", 100, 1, at(1));
    p.on_insert("c", 100, 1, at(2));
    p.on_access("b", at(3), 5);
    p.on_access("c", at(4), 1);
    auto order = p.eviction_order(at(5));
    REQUIRE(order.size() == 3);
    CHECK(order.front().model == "a");  // oldest and least used: first for every policy
    // The first victim for 100 bytes is the head of the order.
    CHECK(p.choose_victims("x", 100, none, at(5)) == strings{order.front().model});
    CHECK(p.eviction_order(at(5)).size() == 3);
  }
}

TEST_CASE("load penalties: a model's mean load time, else a fit of the device's loads by size") {
  load_penalty p(2e9);  // before any load: 2 GB/s
  CHECK(p.of("a", 1'000'000'000) == Approx(0.5));

  // One size seen: the mean bandwidth alone (1 GB in 2 s and in 4 s: 3 s per GB).
  p.record("a", 1'000'000'000, 2.0);
  p.record("a", 1'000'000'000, 4.0);
  CHECK(p.of("a", 1'000'000'000) == Approx(3.0));      // a's own mean
  CHECK(p.of("b", 500'000'000) == Approx(1.5).epsilon(0.02));  // estimated from the device

  // Two sizes on a line seconds = 0.1 + 2 * GB: the fit recovers the fixed cost too.
  load_penalty line(1e9, 1.0);
  line.record("small", 100'000'000, 0.3);
  line.record("big", 2'000'000'000, 4.1);
  CHECK(line.estimate(1'000'000'000) == Approx(2.1));
  CHECK(line.of("small", 100'000'000) == Approx(0.3));

  // Unmeasured loads are ignored; forgetting a model falls back to the estimate.
  line.record("small", 100'000'000, 0);
  CHECK(line.of("small", 100'000'000) == Approx(0.3));
  line.forget("small");
  CHECK(line.of("small", 100'000'000) == Approx(0.3));  // the fit's value at 0.1 GB
  CHECK(line.models() == 1);
}
