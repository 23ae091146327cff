// A model file whose bytes are still arriving: a fetch writes it (ranges in any order, from
// several streams at once) while a load or a describe reads it. Readers wait for the bytes they
// ask for, so a load runs a little behind the fetch instead of after it.
//
// Writer (one fetch at a time, on its own thread): give the file once (give_file), mark each range
// written (arrived), start over when the object was replaced (restart), and end with finish: ok
// once every byte has arrived and been verified, else the error. A writer that goes away without
// finishing must finish with an error (see arrival_guard): readers would otherwise wait forever.
//
// Readers (any thread that may block): open their own descriptor (open_descriptor), wait for a
// prefix (wait_for), and after their last read ask whether what they read is the object's
// (settled). Every read belongs to one epoch; a restart begins a new one and fails the reads of
// the old, so bytes of two versions of an object are never taken together.
//
// Thread-safe. The waits are a data-plane hand-off between a fetch thread and a loader thread (a
// mutex and a condition variable), never used on an actor's thread.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "warm/error.hpp"

namespace warm {

class file_arrival {
 public:
  // A file of `size` bytes, shown as `name` in messages.
  file_arrival(std::uint64_t size, std::string name);
  ~file_arrival();
  file_arrival(const file_arrival&) = delete;
  file_arrival& operator=(const file_arrival&) = delete;

  std::uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // ---- the writer -----------------------------------------------------------------------------
  // Hands over `fd`, a descriptor the file can be read through (owned from now on).
  void give_file(int fd);
  // Bytes [offset, offset + bytes) of the current epoch are written.
  void arrived(std::uint64_t offset, std::uint64_t bytes);
  // What arrived so far is void: the fetch starts again from nothing, in a new epoch.
  void restart();
  // The fetch is over: ok when every byte arrived and was verified. Only the first call counts.
  void finish(expected<void> outcome);

  // ---- readers --------------------------------------------------------------------------------
  // The epoch reads begin in now.
  std::uint64_t epoch() const;
  // Bytes [0, n) have arrived in the current epoch.
  std::uint64_t contiguous() const;
  // A descriptor of its own (the caller closes it), once the writer has given the file; the
  // fetch's error when it finished without one.
  expected<int> open_descriptor() const;
  // Waits until bytes [0, end) have arrived in `epoch`. load_failed when the object changed (a
  // new epoch began) or the fetch failed before they arrived; bytes that did arrive stay
  // readable after a failure (they were verified as they came).
  expected<void> wait_for(std::uint64_t end, std::uint64_t epoch) const;
  // Waits for the fetch's end: ok when it finished ok still in `epoch` (every byte read in it
  // is the object's); else why not.
  expected<void> settled(std::uint64_t epoch) const;

 private:
  const std::uint64_t size_;
  const std::string name_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  int fd_ = -1;
  std::uint64_t epoch_ = 0;
  std::uint64_t prefix_ = 0;                        // [0, prefix_) arrived
  std::map<std::uint64_t, std::uint64_t> islands_;  // begin -> end, arrived beyond the prefix
  static constexpr std::uint64_t no_one_waits = ~std::uint64_t{0};
  mutable std::uint64_t wanted_ = no_one_waits;  // the least prefix a waiting reader wants
  std::optional<expected<void>> outcome_;
};

// Finishes an arrival with "abandoned" when destroyed before finish was called: the writer's
// side held by a fetch task, so that a task dropped unrun (a stopping executor) or one that
// ends by any path leaves no reader waiting.
class arrival_guard {
 public:
  explicit arrival_guard(std::shared_ptr<file_arrival> arrival) : arrival_(std::move(arrival)) {}
  ~arrival_guard();
  arrival_guard(arrival_guard&&) = default;
  arrival_guard& operator=(arrival_guard&&) = delete;
  arrival_guard(const arrival_guard&) = delete;
  arrival_guard& operator=(const arrival_guard&) = delete;

  file_arrival* get() const { return arrival_.get(); }

 private:
  std::shared_ptr<file_arrival> arrival_;
};

}  // namespace warm
