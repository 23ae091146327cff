#include "core/crash_suspects.hpp"

#include <algorithm>

namespace warm {

crash_suspects::crash_suspects(std::uint32_t strikes, std::chrono::nanoseconds window)
    : needed_(std::max<std::uint32_t>(1, strikes)), window_(window) {}

std::vector<std::string> crash_suspects::crashed(const std::vector<std::string>& in_flight,
                                                 timestamp now) {
  for (auto it = strikes_.begin(); it != strikes_.end();)
    it = now - it->second.last > window_ ? strikes_.erase(it) : std::next(it);
  std::vector<std::string> running(in_flight);
  std::sort(running.begin(), running.end());
  running.erase(std::unique(running.begin(), running.end()), running.end());
  std::vector<std::string> blamed;
  for (const auto& model : running) {
    auto& r = strikes_[model];
    ++r.count;
    r.last = now;
    if (running.size() == 1 || r.count >= needed_) {
      blamed.push_back(model);
      strikes_.erase(model);  // its failure record takes over; a later crash counts afresh
    }
  }
  return blamed;
}

}  // namespace warm
