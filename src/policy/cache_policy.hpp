// Eviction policies: which resident models a device gives up so that a new one fits. Pure logic
// with time from the caller, shared by the daemon's device actors and the offline simulator.
//
// Contract: the device tells the policy about every insert, access and removal of a model it
// holds. choose_victims() does not change the policy's state; the device removes (on_remove) the
// victims it actually evicts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "warm/clock.hpp"
#include "warm/error.hpp"

namespace warm {

class cache_policy {
 public:
  virtual ~cache_policy() = default;

  virtual std::string_view name() const = 0;

  // A model became resident: `bytes` on the device, `load_seconds` the cost of loading it again.
  virtual void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now) = 0;
  // The resident model served a request at `now`.
  virtual void on_access(const std::string& model, timestamp now) = 0;
  // The model left the device.
  virtual void on_remove(const std::string& model) = 0;

  // Resident models to evict, in eviction order, whose bytes add up to at least `bytes`, never
  // one for which `pinned` is true. Empty when the unpinned models cannot free enough.
  virtual std::vector<std::string> choose_victims(std::uint64_t bytes,
                                                  const std::function<bool(const std::string&)>& pinned) const = 0;
};

// The policies by name ("lru"); invalid_argument listing the known names otherwise.
expected<std::unique_ptr<cache_policy>> make_policy(std::string_view name);

}  // namespace warm
