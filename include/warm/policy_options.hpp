// Tuning of the eviction policies (docs/policies.md), with documented defaults. Part of
// runtime_options; the simulator takes the same struct.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace warm {

struct policy_options {
  std::uint64_t capacity =
      0;  // the device's bytes (ARC sizes its ghost lists by it); set per device
  // iam: rank_i = log(#{j ≠ i : u_i > u_j} + b0); b0 = iam_bias > 0
  double iam_bias = 1.0;
  // iam: request rate estimator, "ewma" (time constant rate_tau) or "window" (rate_window)
  std::string iam_rate = "ewma";
  std::chrono::duration<double> rate_tau = std::chrono::seconds(60);
  std::chrono::duration<double> rate_window = std::chrono::seconds(60);
  // iam: how often the policy rebuilds its own scores when no scorer drives it (the simulator);
  // 0 = never by itself. The daemon's importance scorer rebuilds every scorer period instead.
  std::chrono::duration<double> rescore_period = std::chrono::seconds(1);
  // kdf: time constant of the decayed request counts (0 = no decay; empty = automatic: kdf_memory
  // × the cache's characteristic time; an empty kdf_memory is chosen online, kdf_tuner.hpp) and
  // the saturation h of a model's value (0 = linear).
  // kdf-adaptive: time constant of its experts' decayed costs.
  std::optional<std::chrono::duration<double>> kdf_tau;
  std::optional<double> kdf_memory;
  double kdf_horizon = 0;
  std::chrono::duration<double> kdf_window = std::chrono::seconds(600);
};

}  // namespace warm
