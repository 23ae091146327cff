// The aspired-versions rules: given the versions of one served model (their states and whether
// each is aspired), the next thing to do — load one, unload one, or wait. These are TensorFlow
// Serving's AvailabilityPreservingPolicy and ResourcePreservingPolicy, step for step; the
// version manager (actors/version_manager.hpp) asks after every change and carries out each
// answer. Plain functions, no state.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "warm/versions.hpp"

namespace warm {

struct version_snapshot {
  std::uint64_t version = 0;
  version_state state = version_state::new_;
  bool aspired = false;
};

struct version_action {
  enum class kind { load, unload };
  kind what = kind::load;
  std::uint64_t version = 0;
  bool operator==(const version_action& o) const { return what == o.what && version == o.version; }
};

// availability_preserving:
//  1. If no version is aspired, or an aspired version is ready, or more than one unaspired
//     version is ready: unload the lowest ready unaspired version (if any).
//  2. Else load the highest aspired version that is new (if any).
// resource_preserving:
//  1. Unload a ready unaspired version (the lowest) if there is one.
//  2. Else, while an unaspired version is not finished (new, loading or unloading; a failed one
//     is finished), wait.
//  3. Else load the highest aspired version that is new (if any).
// Nothing when there is nothing to do now. `versions` in any order.
std::optional<version_action> next_version_action(load_policy policy,
                                                  const std::vector<version_snapshot>& versions);

// The version a served model's name serves: the highest ready aspired version, else the highest
// ready version (an old one keeps serving while the new one cannot load); nothing when none is
// ready.
std::optional<std::uint64_t> default_version(const std::vector<version_snapshot>& versions);

}  // namespace warm
