// What `warm-eval simulate` and `warm-eval sweep` share, so both accept the same tuning flags,
// read capacities the same way and print the same JSON per simulation.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "eval/catalog.hpp"
#include "eval/cluster_sim.hpp"
#include "eval/simulator.hpp"
#include "warm/error.hpp"
#include "warm/policy_options.hpp"

namespace warm::eval_cli {

// The policies' tuning flags (--rescore, --kdf-tau, --kdf-window, --kdf-horizon), with defaults.
struct tuning_flags {
  double rescore_s = 1.0;
  std::string kdf_tau = "auto";     // or seconds
  std::string kdf_memory = "auto";  // or a number
  double kdf_window_s = 600;
  double kdf_horizon = 0;
};

// Registers the tuning flags on `cmd`, bound to `flags` (which must outlive parsing).
void add_tuning_flags(CLI::App& cmd, tuning_flags& flags);

// The policy_options the flags describe.
policy_options to_policy_options(const tuning_flags& flags);

// Capacity in bytes ("2GiB") or as a percentage of the catalog's total bytes ("60%", 0 < P <=
// 1000). invalid_argument naming the text otherwise.
expected<std::uint64_t> parse_capacity(const std::string& text, const eval::catalog& models);

// One simulation as printed: policy, capacity_bytes, requests, hits, misses, hit_ratio,
// byte_miss_ratio, load_ms_total, load_ms_per_request, evictions — in that order.
nlohmann::ordered_json to_json(const eval::sim_result& r);

// One cluster simulation as printed: policy, placement, instances, instance_capacity_bytes,
// requests, cold_starts, waited, hit_ratio, load_ms_total, wait_ms_total, wait_ms_per_request,
// evictions, forced, max_share — in that order.
nlohmann::ordered_json to_json(const eval::cluster_result& r);

}  // namespace warm::eval_cli
