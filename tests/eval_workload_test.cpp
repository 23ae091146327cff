// Synthetic workloads (src/eval/workload.*): shaped catalogs and multi-day traces — sizes and
// their order against rank, popularity by rank, the daily cycle, drift, heavy-tailed gaps,
// bursts, determinism and the refusals.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include "eval/workload.hpp"

using namespace warm;
using namespace warm::eval;

namespace {

std::map<std::string, int> per_model(const trace& t) {
  std::map<std::string, int> n;
  for (const auto& r : t)
    ++n[r.model];
  return n;
}

// Each model's gaps between consecutive requests, in seconds.
std::vector<double> gaps(const trace& t) {
  std::map<std::string, double> last;
  std::vector<double> out;
  for (const auto& r : t) {
    auto it = last.find(r.model);
    if (it != last.end()) out.push_back((r.time_ms - it->second) / 1000);
    last[r.model] = r.time_ms;
  }
  return out;
}

catalog same_size(std::size_t n) {
  shaped_catalog_options o;
  o.models = n;
  o.shape = size_shape::uniform;
  return *make_shaped_catalog(o);
}

}  // namespace

TEST_CASE("shaped catalogs: one size, two classes, log-uniform; random or sorted against rank") {
  shaped_catalog_options o;
  o.models = 10;
  o.min_size = 100;
  o.ratio = 3;
  o.shape = size_shape::uniform;
  auto uniform = make_shaped_catalog(o);
  REQUIRE(uniform);
  for (auto& e : *uniform)
    CHECK(e.bytes == 100);
  CHECK((*uniform)[3].model == "m003");
  CHECK((*uniform)[3].load_ms == fitted_load_ms(100));

  o.shape = size_shape::two_class;
  o.large_share = 0.3;
  o.order = size_order::ascending;
  auto asc = make_shaped_catalog(o);
  REQUIRE(asc);
  std::vector<std::uint64_t> sizes;
  for (auto& e : *asc)
    sizes.push_back(e.bytes);
  CHECK(sizes == std::vector<std::uint64_t>{100, 100, 100, 100, 100, 100, 100, 300, 300, 300});
  o.order = size_order::descending;
  CHECK((*make_shaped_catalog(o))[0].bytes == 300);
  o.order = size_order::random;
  auto shuffled = make_shaped_catalog(o);
  REQUIRE(shuffled);
  std::vector<std::uint64_t> again;
  for (auto& e : *shuffled)
    again.push_back(e.bytes);
  CHECK(std::count(again.begin(), again.end(), 300) == 3);  // a permutation of the same sizes
  CHECK(again != sizes);                                    // seed 1 moves them
  auto same = make_shaped_catalog(o);
  CHECK((*same)[0].bytes == (*shuffled)[0].bytes);

  o.shape = size_shape::log_uniform;
  o.models = 200;
  o.ratio = 40;
  auto logu = make_shaped_catalog(o);
  REQUIRE(logu);
  std::size_t below_geometric_mid = 0;
  for (auto& e : *logu) {
    CHECK(e.bytes >= 100);
    CHECK(e.bytes <= 4000);
    below_geometric_mid += e.bytes < 100 * std::sqrt(40.0);
  }
  CHECK(below_geometric_mid > 70);  // about half below the geometric middle
  CHECK(below_geometric_mid < 130);

  o.ratio = 0.5;
  CHECK(make_shaped_catalog(o).error().code == errc::invalid_argument);
  o.ratio = 2;
  o.large_share = 1.5;
  CHECK_FALSE(make_shaped_catalog(o));
  o.large_share = 0.5;
  o.models = 0;
  CHECK_FALSE(make_shaped_catalog(o));
  CHECK(parse_size_shape("two-class").value() == size_shape::two_class);
  CHECK(parse_size_order("ascending").value() == size_order::ascending);
  CHECK(parse_size_shape("zipf").error().message.find("log-uniform") != std::string::npos);
  CHECK_FALSE(parse_size_order("sideways"));
}

TEST_CASE("synthetic trace: Zipf shares by rank, the daily total and cycle, deterministic") {
  auto models = same_size(5);
  synthetic_options o;
  o.days = 4;
  o.requests_per_day = 20'000;
  o.alpha = 1.0;
  o.drift = 0;
  o.diurnal = 0.8;
  o.pareto_shape = 0;
  o.burst_probability = 0;
  auto t = make_synthetic_trace(o, models);
  REQUIRE(t);
  CHECK(
      std::is_sorted(t->begin(), t->end(), [](auto& a, auto& b) { return a.time_ms < b.time_ms; }));
  double n = static_cast<double>(t->size());
  CHECK(std::abs(n - 80'000) < 5 * std::sqrt(80'000.0));
  CHECK(t->back().time_ms < 4 * 86'400'000.0);
  auto counts = per_model(*t);
  for (int i = 0; i < 5; ++i) {
    double p = (1.0 / (i + 1)) / (137.0 / 60.0);
    CHECK(std::abs(counts[models[i].model] - n * p) < 5 * std::sqrt(n * p * (1 - p)));
  }
  // rate ∝ 1 + 0.8 sin(2π t/day): the first half-day carries (1 + 1.6/π)/2 ≈ 75 % of a day.
  double first_half = 0, day_one = 0;
  for (auto& r : *t) {
    if (r.time_ms < 86'400'000) ++day_one;
    if (r.time_ms < 43'200'000) ++first_half;
  }
  CHECK(first_half / day_one == Approx((1 + 1.6 / M_PI) / 2).margin(0.02));

  auto again = make_synthetic_trace(o, models);
  REQUIRE(again->size() == t->size());
  for (std::size_t i = 0; i < t->size(); i += 1009) {
    CHECK((*again)[i].time_ms == (*t)[i].time_ms);
    CHECK((*again)[i].model == (*t)[i].model);
  }
  o.seed = 2;
  CHECK(make_synthetic_trace(o, models)->at(10).time_ms != (*t)[10].time_ms);
}

TEST_CASE("synthetic trace: Pareto gaps are heavier-tailed than Poisson ones at the same rate") {
  auto models = same_size(20);
  synthetic_options o;
  o.days = 7;
  o.requests_per_day = 4'000;
  o.alpha = 0;  // every model alike: 200 requests a day each
  o.drift = 0;
  o.diurnal = 0;
  o.burst_probability = 0;
  o.pareto_shape = 0;
  auto poisson = gaps(*make_synthetic_trace(o, models));
  o.pareto_shape = 1.5;
  auto pareto = gaps(*make_synthetic_trace(o, models));
  auto share_above = [](const std::vector<double>& g, double seconds) {
    return static_cast<double>(
               std::count_if(g.begin(), g.end(), [&](double x) { return x > seconds; })) /
           static_cast<double>(g.size());
  };
  // Mean gap 432 s for both. Poisson: P(gap > 10 × mean) = e^-10; Pareto(1.5, mean 1):
  // P(> 10) = (1/3 / 10)^1.5 ≈ 0.6 %.
  CHECK(share_above(poisson, 4'320) < 0.001);
  CHECK(share_above(pareto, 4'320) > 0.003);
  double mean_poisson = 0, mean_pareto = 0;
  for (double g : poisson)
    mean_poisson += g / static_cast<double>(poisson.size());
  for (double g : pareto)
    mean_pareto += g / static_cast<double>(pareto.size());
  CHECK(mean_poisson == Approx(432).epsilon(0.05));
  CHECK(mean_pareto == Approx(432).epsilon(0.25));  // a heavy tail: a looser check
}

TEST_CASE(
    "synthetic trace: drift moves ranks at day boundaries; bursts add requests close together") {
  auto models = same_size(50);
  synthetic_options o;
  o.days = 2;
  o.requests_per_day = 50'000;
  o.alpha = 1.2;
  o.diurnal = 0;
  o.pareto_shape = 0;
  o.burst_probability = 0;
  o.drift = 0;
  auto day_counts = [](const trace& t, int day) {
    std::map<std::string, int> n;
    for (auto& r : t)
      if (static_cast<int>(r.time_ms / 86'400'000) == day) ++n[r.model];
    return n;
  };
  auto still = make_synthetic_trace(o, models);
  CHECK(day_counts(*still, 1)["m000"] > 5 * day_counts(*still, 1)["m010"]);
  o.drift = 1;  // every model swaps rank with a random one on day 2
  auto moved = make_synthetic_trace(o, models);
  auto d0 = day_counts(*moved, 0), d1 = day_counts(*moved, 1);
  CHECK(d0["m000"] > 5 * d0["m010"]);  // day 1 is unchanged
  CHECK(d0 == day_counts(*still, 0));
  std::string top1 = std::max_element(d1.begin(), d1.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                     })->first;
  CHECK(top1 != "m000");  // with seed 1 the most popular model moved

  o.drift = 0;
  o.burst_probability = 0.01;
  o.burst_size = 20;
  o.burst_seconds = 5;
  auto bursty = make_synthetic_trace(o, models);
  double extra = static_cast<double>(bursty->size()) - static_cast<double>(still->size());
  CHECK(extra == Approx(0.01 * 20 * static_cast<double>(still->size())).epsilon(0.3));

  o.alpha = -1;
  CHECK(make_synthetic_trace(o, models).error().code == errc::invalid_argument);
  o.alpha = 1;
  o.pareto_shape = 1;
  CHECK_FALSE(make_synthetic_trace(o, models));
  o.pareto_shape = 0;
  o.diurnal = 1;
  CHECK_FALSE(make_synthetic_trace(o, models));
  o.diurnal = 0;
  o.days = 0;
  CHECK_FALSE(make_synthetic_trace(o, models));
  o.days = 1;
  CHECK_FALSE(make_synthetic_trace(o, {}));
}
