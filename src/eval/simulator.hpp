// The policy simulator: a trace through the very policy code the device actors run, with
// simulated time (IAM rebuilds its heap every rescore_period of trace time), a cold start, no
// pinned models and instantaneous loads; every miss costs its model's load time. Also the exact
// offline optimum of total load time (`opt`) and the size-aware farthest-next-use heuristic
// (`belady-size`) for catalogs too large for `opt`.
#pragma once

#include <cstdint>
#include <string>

#include "eval/catalog.hpp"
#include "eval/trace.hpp"
#include "warm/error.hpp"
#include "warm/policy_options.hpp"

namespace warm::eval {

struct sim_result {
  std::string policy;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t requests = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  double hit_ratio = 0;
  double byte_miss_ratio = 0;  // bytes loaded / bytes requested
  double load_ms_total = 0;
  double load_ms_per_request = 0;
  std::uint64_t evictions = 0;
};

// Runs `policy` ("lru", …, "iam", "opt", "belady-size") over the trace. invalid_argument for a
// model missing from the catalog or larger than the capacity (named), an unknown policy, or `opt`
// over more than opt_max_models distinct models.
expected<sim_result> simulate(const trace& requests, const catalog& models, std::uint64_t capacity,
                              const std::string& policy, policy_options options = {});

// Models `opt` accepts (its state space is every subset of them).
inline constexpr std::size_t opt_max_models = 16;

}  // namespace warm::eval
