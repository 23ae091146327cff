// Load penalties: what loading a model onto one device costs, in seconds — the P of the cache
// policies' scores (the importance scorer's "measured load penalty"). Pure logic, one instance per
// device actor; not thread-safe.
//
// A model's penalty is the mean of its successful loads on the device. Before its first one it
// is estimated from its size with a line fitted to every load the device has made (seconds ≈
// fixed + bytes / bandwidth, least squares over exponentially decayed sums, so the fit follows a
// device whose speed drifts); with fewer than two distinct sizes seen, from the mean bandwidth
// alone; before any load, from `default_bytes_per_second`.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace warm {

class load_penalty {
 public:
  explicit load_penalty(double default_bytes_per_second = 1e9, double decay = 0.98);

  // A load of `bytes` that took `seconds` succeeded. Loads with no time measured (seconds ≤ 0)
  // or no bytes are ignored.
  void record(const std::string& model, std::uint64_t bytes, double seconds);

  // The penalty of `model`, which holds `bytes`: its mean load time, or the estimate.
  double of(const std::string& model, std::uint64_t bytes) const;
  // The estimate for a model of `bytes` never loaded here.
  double estimate(std::uint64_t bytes) const;

  // Forgets `model`'s loads (it was unregistered or unloaded); the device's fit keeps them.
  void forget(const std::string& model) { models_.erase(model); }
  std::size_t models() const { return models_.size(); }

 private:
  struct mean_time {
    std::uint64_t count = 0;
    double seconds = 0;
  };
  std::unordered_map<std::string, mean_time> models_;
  double default_bandwidth_, decay_;
  // Decayed sums of the fit over (x = bytes, y = seconds), in units of GB to keep them tame.
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

}  // namespace warm
