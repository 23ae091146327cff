// Time as warm's runtime reads it. Everything that decides by time (failure expiry, last use,
// load waits) asks a clock passed in by the owner, so tests drive a manual clock and never sleep.
#pragma once

#include <atomic>
#include <chrono>

namespace warm {

using timestamp = std::chrono::steady_clock::time_point;

// A source of the current time. Thread-safe: actors on any thread and client threads read it.
class clock {
 public:
  virtual ~clock() = default;
  virtual timestamp now() const = 0;
};

// The real monotonic clock.
class steady_clock final : public clock {
 public:
  timestamp now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that moves only when told to (tests, the simulator).
class manual_clock final : public clock {
 public:
  explicit manual_clock(timestamp start = timestamp{} + std::chrono::hours(1))
      : ticks_(start.time_since_epoch().count()) {}
  timestamp now() const override {
    return timestamp{timestamp::duration{ticks_.load(std::memory_order_acquire)}};
  }
  void advance(std::chrono::nanoseconds by) {
    ticks_.fetch_add(std::chrono::duration_cast<timestamp::duration>(by).count(),
                     std::memory_order_acq_rel);
  }

 private:
  std::atomic<timestamp::duration::rep> ticks_;
};

}  // namespace warm
