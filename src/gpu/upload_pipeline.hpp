// The load pipeline shared by every device: file bytes → (staging) → device memory.
//
// upload() reads the file's range in chunks with large sequential reads and hands each chunk to a
// backend's upload_target. A target with one slot that stages directly into the destination (the
// host device) makes the load a single copy from the page cache. A target with two slots (CUDA:
// pinned staging buffers, async copies) is double-buffered: while slot k's copy to the device is
// in flight, the next chunk is read into slot 1-k; a slot is reused only after wait(slot).
#pragma once

#include <atomic>

#include <cstddef>
#include <cstdint>

#include "storage/file.hpp"
#include "warm/error.hpp"

namespace warm {

class upload_target {
 public:
  virtual ~upload_target() = default;

  // Staging slots (1 = no overlap, 2 = double buffering) and the largest chunk a slot holds.
  virtual std::size_t slots() const = 0;
  virtual std::size_t chunk_bytes() const = 0;

  // Where to read `bytes` (≤ chunk_bytes()) destined for `offset` of the destination, in `slot`.
  virtual void* stage(std::size_t slot, std::uint64_t offset, std::size_t bytes) = 0;
  // Starts moving the staged bytes to the destination; may return before the copy finishes.
  virtual expected<void> submit(std::size_t slot, std::uint64_t offset, std::size_t bytes) = 0;
  // Blocks until the last submit() on `slot` has finished; a no-op for an idle slot.
  virtual expected<void> wait(std::size_t slot) = 0;
};

// Copies `bytes` of `file` starting at `file_offset` to offsets [0, bytes) of the target's
// destination. On return (success or error) no copy is in flight. Errors: load_failed.
// `progress`, when set, is updated (relaxed) with the bytes handed to the target so far.
expected<void> upload(const read_file& file, std::uint64_t file_offset, std::uint64_t bytes,
                      upload_target& target, std::atomic<std::uint64_t>* progress = nullptr);

}  // namespace warm
