#include "gpu/host_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <stdexcept>

namespace warm {

std::uint64_t host_pool::page_bytes() {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

expected<std::unique_ptr<host_pool>> host_pool::reserve(std::uint64_t bytes) {
  const auto page = page_bytes();
  if (bytes == 0) return make_error(errc::invalid_argument, "a host pool needs a length");
  const std::uint64_t length = (bytes + page - 1) / page * page;
  // MAP_NORESERVE: the budget is enforced by the device, not by committing the whole region now.
  void* memory = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED)
    return make_error(errc::capacity_exhausted, "host: cannot reserve " + std::to_string(length) +
                                                    " bytes of address space for the pool");
  return std::unique_ptr<host_pool>(new host_pool(static_cast<char*>(memory), length));
}

host_pool::host_pool(char* base, std::uint64_t length) : base_(base), length_(length) {
  add_free(0, length);
}

host_pool::~host_pool() {
  ::munmap(base_, length_);
}

void host_pool::add_free(std::uint64_t offset, std::uint64_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_length_.emplace(length, offset);
}

void host_pool::remove_free(std::map<std::uint64_t, std::uint64_t>::iterator run) {
  free_by_length_.erase({run->second, run->first});
  free_by_offset_.erase(run);
}

void* host_pool::take(std::uint64_t bytes) {
  const auto page = page_bytes();
  if (bytes == 0 || bytes > length_) return nullptr;
  const std::uint64_t length = (bytes + page - 1) / page * page;
  std::lock_guard<std::mutex> lock(mutex_);
  auto fit = free_by_length_.lower_bound({length, 0});  // shortest long enough, lowest address
  if (fit == free_by_length_.end()) return nullptr;
  const auto [run_length, offset] = *fit;
  remove_free(free_by_offset_.find(offset));
  if (run_length > length) add_free(offset + length, run_length - length);
  taken_.emplace(offset, length);
  taken_bytes_ += length;
  touched_ = std::max(touched_, offset + length);
  return base_ + offset;
}

void host_pool::give_back(void* block) {
  auto* at = static_cast<char*>(block);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = at >= base_ && at < base_ + length_
                ? taken_.find(static_cast<std::uint64_t>(at - base_))
                : taken_.end();
  if (it == taken_.end()) throw std::invalid_argument("host_pool: not a block of this pool");
  std::uint64_t offset = it->first, length = it->second;
  taken_.erase(it);
  taken_bytes_ -= length;
  // Merge with the free runs either side.
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == offset + length) {
    length += next->second;
    remove_free(next);
  }
  auto after = free_by_offset_.lower_bound(offset);
  if (after != free_by_offset_.begin()) {
    auto previous = std::prev(after);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      length += previous->second;
      remove_free(previous);
    }
  }
  add_free(offset, length);
}

host_pool::usage host_pool::now() const {
  std::lock_guard<std::mutex> lock(mutex_);
  usage u;
  u.reserved = length_;
  u.taken = taken_bytes_;
  u.touched = touched_;
  u.largest_free = free_by_length_.empty() ? 0 : free_by_length_.rbegin()->first;
  u.blocks = taken_.size();
  return u;
}

}  // namespace warm
