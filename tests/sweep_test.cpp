// eval::run_sweep: the parallel sweep gives each cell exactly the result a sequential loop of
// eval::simulate gives, in cell order, for every thread count.
#include <catch2/catch.hpp>

#include "eval/sweep.hpp"

namespace {

using namespace warm;
using namespace warm::eval;

catalog make_models(std::size_t n) {
  catalog c;
  for (std::size_t i = 0; i < n; ++i)
    c.push_back({"m" + std::to_string(i), 1000 + 97 * i, 10.0 + static_cast<double>(i)});
  return c;
}

void require_same(const expected<sim_result>& a, const expected<sim_result>& b) {
  REQUIRE(static_cast<bool>(a) == static_cast<bool>(b));
  if (!a) {
    REQUIRE(a.error().message == b.error().message);
    return;
  }
  CHECK(a->policy == b->policy);
  CHECK(a->capacity_bytes == b->capacity_bytes);
  CHECK(a->requests == b->requests);
  CHECK(a->hits == b->hits);
  CHECK(a->misses == b->misses);
  CHECK(a->hit_ratio == b->hit_ratio);  // exact: each simulation is deterministic
  CHECK(a->byte_miss_ratio == b->byte_miss_ratio);
  CHECK(a->load_ms_total == b->load_ms_total);
  CHECK(a->evictions == b->evictions);
}

}  // namespace

TEST_CASE("a parallel sweep returns the sequential results in cell order") {
  catalog models = make_models(40);
  // Cell 0 is by far the slowest (a long trace), so with several threads the short cells finish
  // first: results gathered in finishing order instead of by index would come out shuffled.
  trace long_trace = make_zipf_trace(0.9, models, 400000, 100.0, 1);
  trace short_trace = make_zipf_trace(0.7, models, 300, 100.0, 2);
  std::uint64_t total = total_bytes(models);
  std::vector<sweep_cell> cells{{&long_trace, &models, total / 3, "iam"}};
  const char* policies[] = {"lru", "lfu", "arc", "srrip", "gdsf", "kdf", "belady-size"};
  for (int pct = 20; pct <= 90; pct += 10)
    for (const char* p : policies)
      cells.push_back({&short_trace, &models, total * pct / 100, p});
  cells.push_back({&short_trace, &models, total / 2, "no-such-policy"});  // an error is a result

  policy_options options;
  std::vector<expected<sim_result>> expected_results;
  for (const auto& c : cells)
    expected_results.push_back(simulate(*c.requests, *c.models, c.capacity, c.policy, options));
  REQUIRE_FALSE(expected_results.back());

  for (unsigned threads : {1u, 2u, 4u}) {
    INFO("threads " << threads);
    auto results = run_sweep(cells, options, threads);
    REQUIRE(results.size() == cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      INFO("cell " << i);
      require_same(results[i], expected_results[i]);
    }
  }
}

TEST_CASE("a sweep of no cells is empty; 0 threads means all cores") {
  REQUIRE(run_sweep({}, policy_options{}, 3).empty());
  REQUIRE(sweep_threads(0) >= 1);
  REQUIRE(sweep_threads(5) == 5);
}
