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
//   DIR/incoming/<h>.<n>            a file being written (and <h>.<n>.json, its record being
//                                   written); never loaded, removed at open
// A write goes to incoming/, is fsync'ed, checked against the size it should have, and renamed
// into objects/ with its record: a crash or a full disk never leaves a half file that is loaded.
// Every file operation is relative to DIR's descriptor, by names the tier made (the hash, its
// counter, a checked plain file name), and never follows a symbolic link: a link planted in DIR is
// removed at open, its target untouched. One tier holds DIR at a time (an flock on DIR).
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

// Room for one file being written: where to write it. Commit or abort it exactly once (a copy
// committed or aborted again is refused or ignored: the tier keeps its own record of it, by
// temp_path). Its fields are for reading; commit refuses a reservation whose fields changed.
struct tier_reservation {
  std::string key;
  std::string name;
  std::string temp_path;  // DIR/incoming/<h>.<n>: created empty (0600) by reserve; the writer
                          // opens it by this path and writes exactly `bytes` bytes
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
  // Opens DIR (created if missing, mode 0700; its parent must exist), removes everything in
  // incoming/ and every objects/ entry that is incomplete or inconsistent (no record, a malformed
  // one, a key that does not hash to the directory's name, a name that is not plain, a size that
  // differs, a link, extra files), counting each in removed_at_open, and takes in the rest, oldest
  // stored first, evicting past `capacity`. `policy` names an eviction policy of the policy
  // library (the runtime's --policy); `time` must outlive the tier. invalid_argument for a DIR
  // that is a symbolic link or not a directory, capacity 0, or an unknown policy; unavailable when
  // another disk tier (in this or another process) holds DIR.
  static expected<disk_tier> open(const std::string& dir, std::uint64_t capacity,
                                  const std::string& policy, const clock& time);

  disk_tier(disk_tier&&) noexcept;
  disk_tier& operator=(disk_tier&&) noexcept;
  ~disk_tier();

  // The complete file for `key` whose etag is `etag` (any etag when empty), counting a hit and a
  // use, or nullopt (a miss). A file with another etag is stale, and so is one whose file went
  // missing or changed size on disk: removed (kept while pinned, but still a miss).
  std::optional<tier_file> find(const std::string& key, const std::string& etag);

  // Makes room for `bytes` of `key` (evicting unpinned files in the policy's order) and reserves
  // them: until committed or aborted they count against the capacity (used + reserved never
  // exceeds it) and `key`'s older copy, if any, is not evicted. capacity_exhausted when even
  // evicting every unpinned file would not make room; model_too_large when bytes exceed the
  // capacity; invalid_argument for a `name` that is not a plain file name (empty, '.', '..', a
  // '/', a NUL, over 255 bytes, "entry.json", not UTF-8) or a key that is empty, over 16 KiB or
  // not UTF-8; load_failed when the temp file cannot be created.
  expected<tier_reservation> reserve(const std::string& key, const std::string& name,
                                     std::uint64_t bytes);

  // Checks the written temp file's size, fsyncs it, moves it into objects/ (replacing an older
  // copy of the same key, pinned or not: its record is removed first) and writes its record
  // (fsync'ed, then the directories). On any error the temp file is removed, the reservation
  // released and nothing of the new copy left: load_failed for a wrong size or an I/O error (a
  // full disk); invalid_argument for a reservation this tier does not hold (committed or aborted
  // already) or whose fields changed, or an etag over 4 KiB or not UTF-8. A negative or
  // non-finite fetch_seconds is taken as 0.
  expected<tier_file> commit(tier_reservation reservation, const std::string& etag,
                             double fetch_seconds);
  // Gives the reservation back and removes its temp file. Ignored for one already committed or
  // aborted.
  void abort(tier_reservation reservation);

  // While pinned (a count per key; unpin of an unpinned key is ignored) a file is never chosen for
  // eviction: a load reading it. A key may be pinned before it has a file.
  void pin(const std::string& key);
  void unpin(const std::string& key);

  // Removes the key's file (the source said it is gone or changed), pinned or not: a reader that
  // has it open keeps reading. Not an error when absent.
  void remove(const std::string& key);

  tier_stats stats() const;
  // Every complete file, first to be evicted first (the policy's order, ignoring pins).
  std::vector<tier_file> files() const;
  // DIR as given to open, without trailing slashes.
  const std::string& dir() const;

 private:
  struct impl;
  explicit disk_tier(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace warm::sources
