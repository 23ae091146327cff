#include "core/serving_slot.hpp"

#include <cassert>

namespace warm {

serving_slot::serving_slot(std::string model, device& owner, weights loaded, release_fn on_release)
    : model_(std::move(model)),
      host_id_(loaded->host_id()),
      owner_(&owner),
      bytes_(loaded->bytes()),
      io_(loaded->io()),
      weights_(std::move(loaded)),
      on_release_(std::move(on_release)) {}

serving_slot::~serving_slot() {
  assert(in_flight() == 0 && "a lease outlived its slot");
}

serving_slot::lease& serving_slot::lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    reset();
    slot_ = std::exchange(other.slot_, nullptr);
  }
  return *this;
}

void serving_slot::lease::reset() {
  if (slot_) std::exchange(slot_, nullptr)->release();
}

serving_slot::lease serving_slot::try_acquire(timestamp now, bool count_use) {
  const std::uint64_t add = count_use ? one_use + 1 : 1;
  if (counts_.fetch_add(add) & withdrawn_bit) {
    if (count_use) refused_.fetch_add(1, std::memory_order_relaxed);
    release();
    return lease{};
  }
  if (!count_use) waited_.fetch_add(1, std::memory_order_relaxed);
  auto ticks = now.time_since_epoch().count();
  if (ticks - last_used_.load(std::memory_order_relaxed) > last_used_resolution)
    last_used_.store(ticks, std::memory_order_relaxed);
  return lease{this};
}

bool serving_slot::withdraw() {
  auto old = counts_.fetch_or(withdrawn_bit);
  if ((old & in_flight_mask) == 0) quiesce();
  return freed_->load();
}

bool serving_slot::notify_when_idle() {
  want_idle_.store(true);
  if (in_flight() != 0) return false;
  // Zero now: whoever clears the flag first owns it; either way the caller sees idle.
  want_idle_.store(false);
  return true;
}

void serving_slot::release() {
  auto old = counts_.fetch_sub(1);
  if ((old & in_flight_mask) != 1) return;
  if (old & withdrawn_bit)
    quiesce();
  else if (want_idle_.exchange(false) && on_release_)
    on_release_(event::idle);
}

bool serving_slot::quiesce() {
  if (quiesced_.exchange(true)) return false;
  // The task needs nothing of the slot, which may be gone by the time the reclaimer runs it. The
  // slot keeps its callback unchanged: the release that emptied the count just before the
  // withdrawal may still be calling it (an idle event), and copying it is a read like that call,
  // where moving it out would race with it.
  std::move(weights_).reclaim([done = on_release_, freed = freed_] {
    freed->store(true);  // the device memory is freed and its bytes are back in the budget
    if (done) done(event::quiesced);
  });
  return true;
}

}  // namespace warm
