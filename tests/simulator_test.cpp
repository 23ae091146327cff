// The simulator: hand-worked LRU and LFU runs, and opt against a brute-force search on small
// random instances (opt is never above any online policy).
#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <random>

#include "eval/simulator.hpp"

using namespace warm;
using namespace warm::eval;

namespace {

trace sequence(const std::string& models) {
  trace t;
  double ms = 0;
  for (char c : models)
    t.push_back({ms += 100, std::string(1, c)});
  return t;
}

// Exhaustive search: before every request any subset of the residents may be evicted; a miss
// then needs room. Exponential, for tiny instances only.
double brute_force(const trace& t, const catalog& c, std::uint64_t capacity) {
  std::function<double(std::size_t, std::uint32_t)> best = [&](std::size_t k,
                                                               std::uint32_t resident) -> double {
    if (k == t.size()) return 0;
    std::size_t m = 0;
    while (c[m].model != t[k].model)
      ++m;
    double result = std::numeric_limits<double>::infinity();
    for (std::uint32_t keep = resident;; keep = (keep - 1) & resident) {
      std::uint64_t bytes = 0;
      for (std::size_t j = 0; j < c.size(); ++j)
        if (keep & (1u << j)) bytes += c[j].bytes;
      bool hit = keep & (1u << m);
      if (hit || bytes + c[m].bytes <= capacity)
        result = std::min(result, (hit ? 0 : c[m].load_ms) + best(k + 1, keep | (1u << m)));
      if (keep == 0) break;
    }
    return result;
  };
  return best(0, 0);
}

}  // namespace

TEST_CASE("lru and lfu give the hand-worked hits; opt the fewest loads") {
  catalog c{{"a", 100, 10}, {"b", 100, 10}, {"c", 100, 10}};
  auto t = sequence("abacba");
  auto lru = simulate(t, c, 200, "lru");
  REQUIRE(lru);
  CHECK(lru->misses == 5);
  CHECK(lru->hits == 1);
  CHECK(lru->evictions == 3);
  CHECK(lru->load_ms_total == Approx(50));
  CHECK(lru->load_ms_per_request == Approx(50.0 / 6));
  auto lfu = simulate(t, c, 200, "lfu");
  REQUIRE(lfu);
  CHECK(lfu->misses == 4);
  CHECK(lfu->hits == 2);
  auto opt = simulate(t, c, 200, "opt");
  REQUIRE(opt);
  CHECK(opt->misses == 4);
  CHECK(opt->load_ms_total == Approx(40));
  CHECK(opt->byte_miss_ratio == Approx(400.0 / 600));
}

TEST_CASE("opt equals a brute-force search and is never above an online policy") {
  std::mt19937 rng(7);
  for (int instance = 0; instance < 60; ++instance) {
    std::size_t n = 3 + instance % 3;
    catalog c;
    std::uint64_t total = 0;
    for (std::size_t j = 0; j < n; ++j) {
      auto bytes = std::uniform_int_distribution<std::uint64_t>(10, 100)(rng);
      c.push_back(
          {std::string(1, static_cast<char>('a' + j)), bytes, static_cast<double>(bytes) * 2 + 5});
      total += bytes;
    }
    std::uint64_t biggest = 0;
    for (auto& e : c)
      biggest = std::max(biggest, e.bytes);
    auto capacity =
        std::max(biggest, total * std::uniform_int_distribution<std::uint64_t>(30, 80)(rng) / 100);
    trace t;
    for (int k = 0; k < 9; ++k)
      t.push_back({k * 10.0, c[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)].model});
    auto opt = simulate(t, c, capacity, "opt");
    REQUIRE(opt);
    INFO("instance " << instance);
    CHECK(opt->load_ms_total == Approx(brute_force(t, c, capacity)));
    for (auto name : {"lru", "lfu", "arc", "srrip", "gdsf", "iam", "belady-size"}) {
      auto online = simulate(t, c, capacity, name);
      REQUIRE(online);
      CHECK(opt->load_ms_total <= online->load_ms_total + 1e-9);
    }
  }
}

TEST_CASE("bad simulations are refused with a clear error") {
  catalog c{{"a", 100, 10}, {"b", 300, 10}};
  CHECK(simulate(sequence("ax"), c, 400, "lru").error().message.find("'x'") != std::string::npos);
  CHECK(simulate(sequence("ab"), c, 200, "lru").error().message.find("'b'") != std::string::npos);
  CHECK(simulate(sequence("ab"), c, 400, "nope").error().code == errc::invalid_argument);
  catalog big;
  trace t;
  for (int j = 0; j < 17; ++j) {
    big.push_back({"m" + std::to_string(j), 1, 1});
    t.push_back({static_cast<double>(j), "m" + std::to_string(j)});
  }
  CHECK(simulate(t, big, 100, "opt").error().message.find("belady-size") != std::string::npos);
}
