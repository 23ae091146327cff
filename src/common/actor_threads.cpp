#include "common/actor_threads.hpp"

#include <atomic>

namespace warm::actor_threads {

namespace {

thread_local bool marked = false;
std::atomic<std::uint64_t> freed_on_actor_threads{0};

}  // namespace

void enter() noexcept {
  marked = true;
}
void leave() noexcept {
  marked = false;
}
bool current() noexcept {
  return marked;
}

void note_weights_freed() noexcept {
  if (marked) freed_on_actor_threads.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t weights_freed() noexcept {
  return freed_on_actor_threads.load(std::memory_order_relaxed);
}

}  // namespace warm::actor_threads
