// The local disk tier: files fetched from remote sources, kept in one directory under a byte
// budget so that a later miss loads from local disk instead of fetching again. Evicts with the
// policy library (a file's penalty is the time its fetch took). Not thread-safe: one owner (the
// tier actor) calls it; file I/O happens in the calls, so the owner runs off scheduler threads or
// keeps to the cheap calls (find, touch, stats) there.
//
// Layout (everything confined to DIR; nothing outside it is ever written or removed):
//   DIR/objects/<h>/<name>          a complete file; <h> = first 32 hex digits of SHA-256(key),
//                                   <name> the object's file name (model.safetensors, model.pt:
//                                   the backend is chosen by it)
//   DIR/objects/<h>/entry.json      its record: key, name, size, etag, fetch seconds, stored
//                                   time. Written last: a file without it is incomplete
//   DIR/incoming/<h>.<n>            a file being written; never loaded, removed at open
// A write goes to incoming/, is fsync'ed, checked against the size it should have, and renamed
// into objects/ with its record: a crash or a full disk never leaves a half file that is loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warm/clock.hpp"
#include "warm/error.hpp"

namespace warm::sources {

// A complete file in the tier.
struct tier_file {
  std::string key;   // what it is a copy of (the object's URL)
  std::string path;  // DIR/objects/<h>/<name>
  std::uint64_t bytes = 0;
  std::string etag;  // the source's entity tag when fetched
  double fetch_seconds = 0;
};

// Room for one file being written: where to write it. Not copyable; commit or abort it.
struct tier_reservation {
  std::string key;
  std::string name;
  std::string temp_path;  // DIR/incoming/<h>.<n>
  std::uint64_t bytes = 0;
};

struct tier_stats {
  std::uint64_t capacity = 0, used = 0, reserved = 0;
  std::size_t files = 0;
  std::uint64_t hits = 0, misses = 0, evictions = 0, evicted_bytes = 0;
  std::uint64_t removed_at_open = 0;  // incomplete or inconsistent files found by open's rescan
};

class disk_tier {
 public:
  // Opens DIR (created if missing, mode 0700), removes everything in incoming/ and every objects/
  // entry that is incomplete or inconsistent (no record, a malformed one, a size that differs),
  // and takes in the rest, oldest stored first, evicting past `capacity`. `policy` names an
  // eviction policy of the policy library (the runtime's --policy). invalid_argument for a DIR that
  // is not a directory, capacity 0, or an unknown policy.
  static expected<disk_tier> open(const std::string& dir, std::uint64_t capacity,
                                  const std::string& policy, const clock& time);

  disk_tier(disk_tier&&) noexcept;
  disk_tier& operator=(disk_tier&&) noexcept;
  ~disk_tier();

  // The complete file for `key` whose etag is `etag` (any etag when empty), counting a hit and a
  // use, or nullopt (a miss). A file with another etag is stale: removed.
  std::optional<tier_file> find(const std::string& key, const std::string& etag);

  // Makes room for `bytes` of `key` (evicting unpinned files in the policy's order) and reserves
  // them. capacity_exhausted when even evicting every unpinned file would not make room;
  // model_too_large when bytes exceed the capacity; invalid_argument for a `name` that is not a
  // plain file name.
  expected<tier_reservation> reserve(const std::string& key, const std::string& name,
                                     std::uint64_t bytes);

  // Checks the written temp file's size, fsyncs it, moves it into objects/ (replacing an older
  // copy of the same key) and writes its record. On any error the temp file is removed and the
  // reservation released.
  expected<tier_file> commit(tier_reservation reservation, const std::string& etag,
                             double fetch_seconds);
  // Gives the reservation back and removes its temp file.
  void abort(tier_reservation reservation);

  // While pinned (a count per key) a file is never chosen for eviction: a load reading it.
  void pin(const std::string& key);
  void unpin(const std::string& key);

  // Removes the key's file (the source said it is gone or changed). Not an error when absent.
  void remove(const std::string& key);

  tier_stats stats() const;
  // Every complete file, first to be evicted first.
  std::vector<tier_file> files() const;
  const std::string& dir() const;

 private:
  struct impl;
  explicit disk_tier(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace warm::sources
