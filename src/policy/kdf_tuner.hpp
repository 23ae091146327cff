// kdf's automatic memory: which multiple of the characteristic time kdf remembers requests for,
// chosen online from miniature simulations of the cache.
//
// How long a request should count depends on the traffic: models asked for in bursts hours apart
// want a short memory (a burst says little about the next one), steady traffic with a few
// models much more popular than the rest wants a long one. kdf_tuner runs a shadow cache for
// each candidate memory (kdf_policy with that memory fixed), all fed the same requests, and
// answers the memory of the shadow that has paid the least load time: a shadow's miss costs it
// the model's load seconds. Costs are halved every `half_life` requests the shadows see, so the
// choice follows a change in the traffic without forgetting what one quiet hour says.
//
// Cost. The shadows are miniature: a model takes part when a fixed hash of its id falls in the
// sampled share of the hash space, and each shadow's capacity is that share of the device's. The
// share starts at 1 and halves whenever the device holds more than `sampled_residents` models
// per share (models that leave the sample leave the shadows), so each shadow holds about
// `sampled_residents` models or fewer and a request for an unsampled model costs one hash.
// This is spatial sampling as in SHARDS (Waldspurger et al., FAST '15) and its miniature
// simulations (USENIX ATC '17).
//
// Not thread-safe; owned by one kdf_policy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warm/clock.hpp"
#include "warm/policy_options.hpp"

namespace warm {

class kdf_policy;

class kdf_tuner {
 public:
  // The memories tried; the first is the choice until another shadow has paid switch_margin less.
  static constexpr double memories[] = {100, 300, 10};
  static constexpr std::size_t sampled_residents = 128;
  static constexpr std::uint64_t half_life = 1 << 16;  // sampled requests
  static constexpr double switch_margin = 0.02;        // a new choice must have paid this much less

  // `options` as the owning kdf's (capacity, horizon); the shadows fix their memory.
  explicit kdf_tuner(const policy_options& options);
  ~kdf_tuner();

  // A request for `model` (`count` uses at `now`), which takes `bytes` and `load_seconds` to load.
  void on_request(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now,
                  std::uint64_t count);
  // The device holds `residents` models: lowers the sampled share when it grew past the bound.
  void on_residents(std::size_t residents);
  void set_capacity(std::uint64_t bytes);

  // The memory of the shadow that has paid the least: another is chosen once it has paid
  // switch_margin less than the current choice (each change re-keys kdf's index).
  double memory() const { return shadows_[leader_].memory; }

  // For tests and inspection.
  struct shadow_view {
    double memory = 0;
    double cost = 0;  // decayed load seconds of its misses
    std::size_t residents = 0;
  };
  std::vector<shadow_view> shadows() const;
  double sampled_share() const;  // 1, 1/2, 1/4, …

  // The fixed 64-bit hash (FNV-1a) that decides which models are sampled.
  static std::uint64_t hash(const std::string& model);

 private:
  struct shadow {
    double memory = 0;
    std::unique_ptr<kdf_policy> policy;  // its residents are the shadow cache's
    std::uint64_t bytes = 0;
    double cost = 0;
  };
  bool sampled(const std::string& model) const;
  void request(shadow& s, const std::string& model, std::uint64_t bytes, double load_seconds,
               timestamp now, std::uint64_t count);
  void choose_leader();

  std::uint64_t capacity_;
  unsigned share_shift_ = 0;  // sampled: hash < 2^(64 − shift); shift 0 samples every model
  std::vector<shadow> shadows_;
  std::size_t leader_ = 0;
  std::uint64_t requests_ = 0;  // sampled requests since the last halving
};

}  // namespace warm
