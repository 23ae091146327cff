// When a version directory is complete: a served model's source takes a version only once its
// model file has stopped changing, so that a file still being copied in is never loaded.
//
// The rule: a version is settled when its model file (path, size, modification time, inode) is
// the same at two looks at least `settle` apart, or when at its first look the file was last
// modified at least `settle` before (it was complete before anyone looked: a restart). A file that
// changes starts over. A settled version stays settled while it is present, and is forgotten when
// a look no longer finds it. A writer that pauses longer than `settle` in the middle of a file can
// still be taken half-written: write elsewhere and rename into place (atomic), which this rule
// takes at the next look after `settle`.
//
// Plain logic: the caller looks (model_repository::look_at_versions) and passes the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include "warm/model_repository.hpp"

namespace warm {

class version_settler {
 public:
  explicit version_settler(std::chrono::nanoseconds settle) : settle_(settle) {}

  // Takes one look, made at `now` (steady clock) and `wall_now_ns` (the clock file times use),
  // and answers the settled versions, ascending.
  std::vector<std::uint64_t> take(const std::vector<version_file>& look,
                                  std::chrono::nanoseconds now, std::int64_t wall_now_ns);

  // Versions seen but not settled yet (for status).
  std::size_t pending() const;

 private:
  struct seen {
    version_file file;
    std::chrono::nanoseconds since{};  // steady time it was first seen with this identity
    bool settled = false;
  };
  std::chrono::nanoseconds settle_;
  std::map<std::uint64_t, seen> versions_;
};

}  // namespace warm
