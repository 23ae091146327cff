// The console's event log (docs/console.md): the newest model events, numbered, for the feed to
// hand out those a client has not seen. Pure logic; console::monitor keeps one under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "warm/runtime_types.hpp"

namespace warm::console {

struct event {
  std::uint64_t seq = 0;  // 1, 2, … in the order added
  double unix_seconds = 0;
  std::string model;
  // "queued", "loading", "loaded", "evicted", "unloaded", "failed", "cancelled",
  // "unregistered" (model_event_kind) or "version" (a served model's default version moved).
  std::string kind;
  std::string from, to;  // states (model_state's names), or versions for "version"
  std::string device;
  std::string reason;  // "evicted": capacity, replaced, lost
  std::string error;   // "failed": the load's error
};

// What a state change means to an operator: the kind above. A LOADED model becoming NOT_LOADED
// was "evicted" for a reason of the device's (capacity, replaced, lost) and "unloaded" otherwise
// (an operator, a served model's version retired); a queued or loading one that becomes
// NOT_LOADED was "cancelled"; a failed one, "retry".
std::string model_event_kind(const model_event& e);

// The event of a state change, at `unix_seconds`.
event from_model_event(const model_event& e, double unix_seconds);

// The newest `capacity` events, numbered as they are added.
class event_log {
 public:
  explicit event_log(std::size_t capacity = 1000) : capacity_(capacity) {}

  // Numbers `e` (its seq is overwritten) and keeps it, dropping the oldest past the capacity.
  void add(event e);
  // Events with seq > after, newest first, at most `max`.
  std::vector<event> after(std::uint64_t after, std::size_t max) const;
  std::uint64_t last() const { return next_ - 1; }  // the newest's seq; 0 before any

 private:
  std::size_t capacity_;
  std::uint64_t next_ = 1;
  std::deque<event> events_;  // oldest first
};

}  // namespace warm::console
