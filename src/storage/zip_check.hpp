// Checking a zip archive (a TorchScript `model.pt`) before anything inflates it.
//
// libtorch trusts the sizes a zip's entries declare: a 2.9 MB deflated archive grew the server by
// 3 GB. check_zip reads only the archive's structure — the end of central directory record, the
// zip64 locator and record when present, the central directory and the 30-byte fixed part of each
// entry's local header — and checks every declared size and position against the archive's length
// and the caller's limits. It never inflates anything and never allocates in proportion to a
// number the file declares: the largest buffer is the central directory, read whole once it is
// known to lie inside the file and to be at most `zip_limits::max_directory_bytes`.
//
// What it refuses (invalid_argument, the message naming the entry and the numbers):
//  1. no end of central directory record within the last 65557 bytes, or one whose comment
//     length does not end exactly at the end of the file (no trailing or leading data);
//  2. a zip64 locator or record that is malformed, outside the file, or disagrees with the
//     32-bit fields it extends; 0xFFFFFFFF directory size/offset with no zip64 locator;
//  3. multi-disk archives (any disk number other than 0);
//  4. a central directory outside the file or not before the end records, over the directory
//     cap, or whose entries do not fill it exactly with the declared count;
//  5. per entry: a bad central header signature, name/extra/comment running past the directory,
//     a malformed extra field, 0xFFFFFFFF sizes/offset without the zip64 extra (id 0x0001)
//     value, encryption (flag bit 0), a method other than 0 (stored) or 8 (deflate), a stored
//     entry whose sizes differ, a local header outside the file or without its signature
//     0x04034b50, and data (after the LOCAL header's name and extra) running past the central
//     directory's start;
//  6. the limits: entry count, each entry's size, the total, the inflation ratio.
// Pure code over a read callback, safe on any input; never throws (short of std::bad_alloc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "warm/error.hpp"

namespace warm {

// What an archive may declare. Defaults are a generous backstop; callers set the byte limits
// from their own model size limit.
struct zip_limits {
  // Most entries in the central directory (the count is checked before the directory is read).
  std::uint64_t max_entries = 100000;
  // Most uncompressed bytes all entries may declare together (inclusive).
  std::uint64_t max_total_bytes = std::uint64_t{16} << 30;
  // Most uncompressed bytes one entry may declare (inclusive).
  std::uint64_t max_entry_bytes = std::uint64_t{16} << 30;
  // Most uncompressed/compressed for a deflated entry (inclusive; a deflated entry declaring
  // bytes from 0 compressed bytes is always over). Must be >= 1 and not NaN. Stored entries
  // must declare equal sizes instead.
  double max_ratio = 100.0;
  // Largest central directory read (it is read whole; 100000 entries with 100-byte names take
  // ~15 MB).
  std::uint64_t max_directory_bytes = std::uint64_t{64} << 20;
};

// What a checked archive declares.
struct zip_summary {
  std::uint64_t entries = 0;        // entries in the central directory
  std::uint64_t total_bytes = 0;    // sum of declared uncompressed sizes
  std::uint64_t largest_entry = 0;  // largest declared uncompressed size
  bool compressed = false;          // some entry uses deflate
  bool zip64 = false;               // the archive has a zip64 end of central directory record
};

// Reads `size` bytes at `offset`: exactly min(size, file_size - offset) bytes, or an error that
// check_zip returns as is. check_zip only asks for ranges inside `file_size`, each at most
// max(65557, max_directory_bytes) bytes long.
using zip_read_at = std::function<expected<std::string>(std::uint64_t offset, std::size_t size)>;

// Checks the structure and declared sizes of the zip archive of `file_size` bytes that `read_at`
// reads (the rules in this file's comment). The summary on success; invalid_argument naming what
// is wrong otherwise (also for limits that are not valid), or read_at's own error. A read that
// comes back short (the file shrank) is load_failed. Reads: the last <= 65557 bytes, 20 + 56
// bytes for zip64, the directory, then 30 bytes per entry.
expected<zip_summary> check_zip(std::uint64_t file_size, const zip_read_at& read_at,
                                const zip_limits& limits);

// check_zip over `fd`, an open descriptor of a regular file (borrowed; not closed), read with
// pread so the file offset does not move. The size is fstat's at the call; invalid_argument when
// `fd` is not a regular file, load_failed for OS errors. Safe to call from several threads on
// the same descriptor.
expected<zip_summary> check_zip_fd(int fd, const zip_limits& limits);

}  // namespace warm
