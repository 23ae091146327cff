#include "core/version_rules.hpp"

#include <algorithm>

namespace warm {

namespace {

std::optional<std::uint64_t> highest_new_aspired(const std::vector<version_snapshot>& versions) {
  std::optional<std::uint64_t> best;
  for (auto& v : versions)
    if (v.aspired && v.state == version_state::new_ && (!best || v.version > *best))
      best = v.version;
  return best;
}

std::optional<std::uint64_t> lowest_ready_unaspired(const std::vector<version_snapshot>& versions) {
  std::optional<std::uint64_t> best;
  for (auto& v : versions)
    if (!v.aspired && v.state == version_state::ready && (!best || v.version < *best))
      best = v.version;
  return best;
}

std::optional<version_action> load(std::optional<std::uint64_t> version) {
  if (!version) return std::nullopt;
  return version_action{version_action::kind::load, *version};
}

std::optional<version_action> unload(std::optional<std::uint64_t> version) {
  if (!version) return std::nullopt;
  return version_action{version_action::kind::unload, *version};
}

std::optional<version_action> availability_preserving(
    const std::vector<version_snapshot>& versions) {
  bool any_aspired = false, aspired_ready = false;
  std::size_t unaspired_ready = 0;
  for (auto& v : versions) {
    if (v.aspired) {
      any_aspired = true;
      aspired_ready = aspired_ready || v.state == version_state::ready;
    } else if (v.state == version_state::ready) {
      ++unaspired_ready;
    }
  }
  if (!any_aspired || aspired_ready || unaspired_ready > 1)
    if (auto action = unload(lowest_ready_unaspired(versions))) return action;
  return load(highest_new_aspired(versions));
}

std::optional<version_action> resource_preserving(const std::vector<version_snapshot>& versions) {
  if (auto action = unload(lowest_ready_unaspired(versions))) return action;
  // An unaspired version that is neither gone nor failed still holds (or may yet hold) memory.
  bool unfinished = std::any_of(versions.begin(), versions.end(), [](const version_snapshot& v) {
    return !v.aspired && v.state != version_state::error;
  });
  if (unfinished) return std::nullopt;
  return load(highest_new_aspired(versions));
}

}  // namespace

std::optional<version_action> next_version_action(load_policy policy,
                                                  const std::vector<version_snapshot>& versions) {
  return policy == load_policy::availability_preserving ? availability_preserving(versions)
                                                        : resource_preserving(versions);
}

std::optional<std::uint64_t> default_version(const std::vector<version_snapshot>& versions) {
  std::optional<std::uint64_t> aspired, any;
  for (auto& v : versions) {
    if (v.state != version_state::ready) continue;
    if (!any || v.version > *any) any = v.version;
    if (v.aspired && (!aspired || v.version > *aspired)) aspired = v.version;
  }
  return aspired ? aspired : any;
}

}  // namespace warm
