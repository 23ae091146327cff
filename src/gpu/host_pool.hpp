// A region of host memory reserved once for one host device's large weights buffers, and reused.
//
// A fresh anonymous mapping is zero-filled by the kernel page by page before a load copies into
// it, so a load into fresh memory runs at a fraction of memory speed. The pool reserves the
// device's budget of address space once; a page is faulted in (zero-filled) the first time a
// buffer uses it and stays resident when the buffer is freed, so a later load into it is one copy
// at memory speed. The price: the process keeps the most the device ever held (its high-water
// mark, at most the budget) resident after the models are gone.
//
// Blocks are page-aligned runs of the region, handed out best-fit (the shortest free run that is
// long enough, the lowest address among equals) and merged with free neighbours when given back.
// A request no free run can hold (the region is fragmented) gets nothing: the caller allocates
// elsewhere. Thread-safe: buffers are taken on loader threads and given back on the reclaimer's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "warm/error.hpp"

namespace warm {

class host_pool {
 public:
  // The address space of `bytes` (rounded up to whole pages) reserved, nothing faulted in.
  // capacity_exhausted when the system refuses the reservation.
  static expected<std::unique_ptr<host_pool>> reserve(std::uint64_t bytes);
  ~host_pool();
  host_pool(const host_pool&) = delete;
  host_pool& operator=(const host_pool&) = delete;

  // A page-aligned block of at least `bytes` (> 0), or nullptr when no free run is that long.
  void* take(std::uint64_t bytes);
  // Gives back a block take() returned; its pages stay faulted in. Anything else is a bug
  // (std::invalid_argument).
  void give_back(void* block);

  struct usage {
    std::uint64_t reserved = 0;      // the region's length
    std::uint64_t taken = 0;         // bytes in blocks handed out (whole pages)
    std::uint64_t touched = 0;       // the highest end of any block handed out: faulted in, at most
    std::uint64_t largest_free = 0;  // the longest free run
    std::uint64_t blocks = 0;        // blocks handed out now
  };
  usage now() const;

  static std::uint64_t page_bytes();

 private:
  host_pool(char* base, std::uint64_t length);
  void add_free(std::uint64_t offset, std::uint64_t length);
  void remove_free(std::map<std::uint64_t, std::uint64_t>::iterator run);

  char* const base_;
  const std::uint64_t length_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::uint64_t> free_by_offset_;             // offset → length
  std::set<std::pair<std::uint64_t, std::uint64_t>> free_by_length_;  // (length, offset)
  std::map<std::uint64_t, std::uint64_t> taken_;                      // offset → length
  std::uint64_t taken_bytes_ = 0, touched_ = 0;
};

}  // namespace warm
