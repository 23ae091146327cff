#include "gpu/upload_pipeline.hpp"

#include <algorithm>

namespace warm {

expected<void> upload(const read_file& file, std::uint64_t file_offset, std::uint64_t bytes,
                      upload_target& target, std::atomic<std::uint64_t>* progress) {
  const std::size_t slots = std::max<std::size_t>(1, target.slots());
  const std::uint64_t chunk = std::max<std::size_t>(1, target.chunk_bytes());
  auto drain = [&]() -> expected<void> {
    expected<void> first;
    for (std::size_t s = 0; s < slots; ++s)
      if (auto r = target.wait(s); !r && first) first = std::move(r);
    return first;
  };
  file.advise_sequential();
  std::size_t slot = 0;
  for (std::uint64_t done = 0; done < bytes; done += chunk, slot = (slot + 1) % slots) {
    auto n = static_cast<std::size_t>(std::min(chunk, bytes - done));
    // The slot's previous copy must finish before its staging memory is overwritten.
    if (auto r = target.wait(slot); !r) {
      (void)drain();
      return r;
    }
    void* staging = target.stage(slot, done, n);
    if (auto r = file.read_exactly(staging, n, file_offset + done); !r) {
      (void)drain();
      return r;
    }
    if (auto r = target.submit(slot, done, n); !r) {
      (void)drain();
      return r;
    }
    if (progress) progress->store(done + n, std::memory_order_relaxed);
  }
  return drain();
}

}  // namespace warm
