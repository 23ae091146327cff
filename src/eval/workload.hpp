// Synthetic workloads for the broad evaluation: catalogs whose sizes follow a shape (one size,
// two classes, log-uniform) and an order against popularity, and multi-day traces with drifting
// Zipf popularity, a daily rate cycle, heavy-tailed inter-arrival times and bursts. Pure logic,
// deterministic per seed on every platform. docs/eval/traces.md describes both.
#pragma once

#include <cstdint>
#include <string>

#include "eval/catalog.hpp"
#include "eval/trace.hpp"
#include "warm/error.hpp"

namespace warm::eval {

// How a shaped catalog's sizes are drawn.
enum class size_shape {
  uniform,      // every model min_size bytes
  two_class,    // a `large_share` of the models ratio × min_size, the others min_size
  log_uniform,  // log-uniform in [min_size, ratio × min_size]
};
// How sizes are laid out against the catalog order, which is the popularity rank of a synthetic
// trace (model 0 the most popular).
enum class size_order {
  random,      // independent of rank
  ascending,   // the most popular models are the smallest (adapters in front of bases)
  descending,  // the most popular models are the largest
};

// "uniform", "two-class", "log-uniform" / "random", "ascending", "descending"; invalid_argument
// listing the names otherwise.
expected<size_shape> parse_size_shape(const std::string& name);
expected<size_order> parse_size_order(const std::string& name);

struct shaped_catalog_options {
  std::size_t models = 100;
  size_shape shape = size_shape::log_uniform;
  size_order order = size_order::random;
  std::uint64_t min_size = 50'000'000;  // bytes, >= 1
  double ratio = 40;                    // largest / smallest size, >= 1
  double large_share = 0.5;             // two_class: share of large models, in [0, 1]
  std::uint64_t seed = 1;
};

// A catalog of synthetic_model_id(i, models) entries, load_ms = fitted_load_ms(bytes).
// invalid_argument for models 0, min_size 0, ratio < 1 or not finite, large_share outside [0, 1].
expected<catalog> make_shaped_catalog(const shaped_catalog_options& o);

// A multi-day synthetic trace over `models` (popularity rank = catalog order at the start).
// The generator, in one-hour slots:
//  1. Popularity: model at rank r (0-based) has weight 1/(r+1)^alpha. At each day boundary every
//     model, with probability `drift`, swaps its rank with a uniformly chosen model.
//  2. Rate: requests_per_day spread over the day with a daily cycle,
//     rate(t) ∝ 1 + diurnal · sin(2π t / 1 day), diurnal in [0, 1).
//  3. Arrivals: each model is a renewal process in operational time (its expected requests in a
//     slot = the slot's rate × its popularity share). Gaps between its requests are exponential
//     (pareto_shape 0: Poisson) or Pareto with that shape (> 1) scaled to mean 1: most gaps short,
//     some very long — models quiet for hours or days, then back.
//  4. Bursts: each request starts, with probability burst_probability, burst_size more requests
//     for the same model spread uniformly over the next burst_seconds.
// Times are quantized to whole microseconds; the trace is sorted (ties: model order).
struct synthetic_options {
  double days = 7;
  double requests_per_day = 20'000;
  double alpha = 0.9;
  double drift = 0.05;
  double diurnal = 0.5;
  double pareto_shape = 1.5;
  double burst_probability = 0.001;
  std::size_t burst_size = 20;
  double burst_seconds = 60;
  std::uint64_t seed = 1;
};

// invalid_argument for an empty catalog, days or requests_per_day not positive, alpha < 0,
// drift outside [0, 1], diurnal outside [0, 1), pareto_shape neither 0 nor > 1, a negative
// burst probability or above 1, or burst_seconds < 0.
expected<trace> make_synthetic_trace(const synthetic_options& o, const catalog& models);

}  // namespace warm::eval
