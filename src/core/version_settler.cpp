#include "core/version_settler.hpp"

namespace warm {

std::vector<std::uint64_t> version_settler::take(const std::vector<version_file>& look,
                                                 std::chrono::nanoseconds now,
                                                 std::int64_t wall_now_ns) {
  std::map<std::uint64_t, seen> next;
  std::vector<std::uint64_t> settled;
  for (auto& file : look) {
    auto old = versions_.find(file.version);
    seen s;
    if (old != versions_.end() && old->second.file.same_file(file)) {
      s = old->second;
      s.settled = s.settled || now - s.since >= settle_;
    } else if (old != versions_.end() && old->second.settled &&
               old->second.file.path == file.path) {
      // Settled once and rewritten in place since: it stays (it may be served already); a load
      // reads the file as it is then.
      s = old->second;
      s.file = file;
    } else {
      s.file = file;
      s.since = now;
      s.settled = wall_now_ns - file.mtime_ns >= settle_.count();
    }
    if (s.settled) settled.push_back(file.version);
    next.emplace(file.version, std::move(s));
  }
  versions_ = std::move(next);
  return settled;
}

std::size_t version_settler::pending() const {
  std::size_t n = 0;
  for (auto& [v, s] : versions_)
    n += s.settled ? 0 : 1;
  return n;
}

}  // namespace warm
