// The loader pool's queue: which model load starts next. Pure logic, no actors, no clock: times
// come from the caller, so tests and the simulator are deterministic.
//
// Ordering (after ModelMesh's loading queue):
//   1. waiting loads — at least one request waits for the model — earliest waiting request first;
//   2. proactive loads — loadNow at registration, ensureLoaded without a waiter — most recently
//      used first.
// Ties keep insertion order. A request for a model whose proactive load is queued promotes it to
// class 1 at once. Each model is queued at most once; cancel() removes it (unregistration).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/timestamp.hpp"

namespace warm {

class load_queue {
 public:
  enum class priority { waiting, proactive };

  struct entry {
    std::string model;
    priority kind = priority::proactive;
    timestamp first_wait{};  // waiting: arrival of the earliest waiting request
    timestamp last_used{};   // proactive: the model's last use
  };

  // Queues a load that a request waits on, or promotes a queued proactive load. For a model
  // already waiting, keeps the earlier of the two arrival times. Returns true if newly queued.
  bool push_waiting(const std::string& model, timestamp arrival);

  // Queues a proactive load. If already queued proactively, the later last-used time wins; a
  // waiting load stays waiting. Returns true if newly queued.
  bool push_proactive(const std::string& model, timestamp last_used);

  // Removes the model's queued load; false if none was queued.
  bool cancel(const std::string& model);

  // Removes and returns the first entry in priority order, or nullopt when empty.
  std::optional<entry> pop();

  // Removes and returns the first entry, in priority order, that `ready` accepts (e.g. one whose
  // bytes fit on a device now); entries before it stay queued in place.
  std::optional<entry> pop_first(const std::function<bool(const entry&)>& ready);

  bool contains(const std::string& model) const { return index_.count(model) != 0; }
  const entry* find(const std::string& model) const;
  std::size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }

  // Every queued entry in the order they would start (for inspection).
  std::vector<entry> snapshot() const;

 private:
  // (class, sort ticks, insertion sequence): waiting sorts by arrival ascending, proactive by
  // last use descending (negated ticks).
  using key = std::tuple<int, std::int64_t, std::uint64_t>;
  struct slot {
    key order;
    entry value;
  };

  key make_key(const entry& e);
  void insert(entry e);
  entry erase(std::unordered_map<std::string, slot>::iterator it);

  std::set<std::pair<key, std::string>> order_;
  std::unordered_map<std::string, slot> index_;
  std::uint64_t sequence_ = 0;
};

}  // namespace warm
