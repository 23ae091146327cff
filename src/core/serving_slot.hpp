// A model resident on a device, as requests see it: leases count the inferences in flight, and a
// withdrawal (eviction, unregistration) stops new leases and frees the weights when the last
// lease ends. This is how an unload waits for in-flight inferences without a lock: the hit path
// takes a lease with one atomic increment and never sends a message.
//
// Protocol: the in-flight count and the withdrawn flag share one atomic word, so every decision
// is taken on one read-modify-write of it and sees both at the same instant:
//   acquire:  old = (in_flight += 1); if old.withdrawn { release; fail } — the lease holder may
//             then read the weights until it releases;
//   withdraw: old = (withdrawn = true); if old.in_flight == 0 { quiesce } — no new lease can
//             succeed after;
//   release:  old = (in_flight -= 1); if old.in_flight == 1: old.withdrawn ? quiesce
//             : (idle wanted ? notify);
//   quiesce:  exactly once — frees the weights, then calls on_release(quiesced).
// The word's modification order is a total order of acquisitions, releases and the withdrawal:
// quiesce runs only at the point where the count is zero and the flag set, after which no lease
// succeeds, so the weights outlive every successful lease. (Separate words for the count and the
// flag let a release that emptied the count read the flag set later, after a new lease had been
// taken, and free the weights under it.)
//
// Freeing weights can be slow (munmap of gigabytes, cudaFree waiting for the device): quiesce
// hands the freeing and the quiesced event to the weights' reclaimer as one task
// (core/weights.hpp), so the thread that quiesced (possibly an actor's) never frees.
//
// on_release runs on whichever thread made the slot quiescent or idle (a client thread, an
// executor thread, the reclaimer or the withdrawing actor): it must only post a message.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/weights.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"

namespace warm {

// Made with std::make_shared (a lease can hand out a shared reference to its slot).
class serving_slot : public std::enable_shared_from_this<serving_slot> {
 public:
  // Why on_release was called.
  enum class event { quiesced, idle };
  using release_fn = std::function<void(event)>;

  // `loaded` (not empty) must be resident on `owner`, which must outlive the slot.
  serving_slot(std::string model, device& owner, weights loaded, release_fn on_release);
  ~serving_slot();

  // Sets the callback; only before the slot is shared (it is not synchronized).
  void set_release(release_fn on_release) { on_release_ = std::move(on_release); }
  serving_slot(const serving_slot&) = delete;
  serving_slot& operator=(const serving_slot&) = delete;

  // A counted use of the weights. Move-only; releasing (destroying) it may quiesce the slot.
  class lease {
   public:
    lease() = default;
    lease(lease&& other) noexcept : slot_(std::exchange(other.slot_, nullptr)) {}
    lease& operator=(lease&& other) noexcept;
    ~lease() { reset(); }
    explicit operator bool() const { return slot_ != nullptr; }
    void reset();

    const serving_slot& slot() const { return *slot_; }
    // A reference that keeps the slot alive (for a lease handed to another thread).
    std::shared_ptr<serving_slot> share() const { return slot_->shared_from_this(); }
    const resident_model& model() const { return *slot_->weights_; }
    device& owner() const { return *slot_->owner_; }

   private:
    friend class serving_slot;
    explicit lease(serving_slot* slot) : slot_(slot) {}
    serving_slot* slot_ = nullptr;
  };

  // A lease, or an empty one once the slot is withdrawn. Records a use at `now` unless
  // `count_use` is false (requests that waited for the load: the load was their reference, so
  // uses() leaves them out; served() and last_used() count them).
  // The caller keeps the slot alive (holds its shared_ptr) for as long as the lease lives.
  lease try_acquire(timestamp now, bool count_use = true);

  // Stops new leases. Returns true when the weights' bytes are back on return (no lease was held
  // and they were freed inline, or an earlier quiesce's free has finished). Otherwise the
  // quiesced event, sent after the free, says when. Idempotent.
  bool withdraw();

  // Asks for one `idle` event when the in-flight count next drops to zero. Returns true if it is
  // already zero (no event will come for this request).
  bool notify_when_idle();

  const std::string& model() const { return model_; }
  // The weights' resident_model::host_id(), read once when the slot was made.
  const std::string& host_id() const { return host_id_; }
  const device& owner() const { return *owner_; }
  std::uint64_t bytes() const { return bytes_; }
  // The loaded model's inputs and outputs (a copy: still there once the weights are reclaimed).
  const model_io& io() const { return io_; }
  std::uint32_t in_flight() const {
    return static_cast<std::uint32_t>(counts_.load() & in_flight_mask);
  }
  bool withdrawn() const { return (counts_.load() & withdrawn_bit) != 0; }
  bool quiesced() const { return quiesced_.load(); }  // no lease can be held any more
  // Successful acquisitions and (to within last_used_resolution) the time of the last one.
  // Relaxed: for policies and inspection.
  std::uint64_t uses() const {
    return ((counts_.load(std::memory_order_relaxed) & ~withdrawn_bit) >> use_shift) -
           refused_.load(std::memory_order_relaxed);
  }
  timestamp last_used() const {
    return timestamp{timestamp::duration{last_used_.load(std::memory_order_relaxed)}};
  }
  // Every lease granted: uses() and the requests that waited for the load (what an operator calls
  // the model's uses while it is resident; last_used() covers both). Relaxed: for inspection.
  std::uint64_t served() const { return uses() + waited_.load(std::memory_order_relaxed); }

 private:
  void release();
  bool quiesce();  // true for the one call that quiesced

  const std::string model_;
  const std::string host_id_;
  device* const owner_;
  const std::uint64_t bytes_;
  model_io io_;
  weights weights_;
  release_fn on_release_;
  // Set once the weights are freed, by whichever thread freed them; shared with the free task.
  std::shared_ptr<std::atomic<bool>> freed_ = std::make_shared<std::atomic<bool>>(false);
  // One word so that a lease costs one read-modify-write on the hit path: the low 24 bits count
  // leases in flight, bits 24-62 count acquisitions (refused ones are subtracted by uses()), and
  // the top bit is the withdrawn flag.
  static constexpr int use_shift = 24;
  static constexpr std::uint64_t in_flight_mask = (std::uint64_t{1} << use_shift) - 1;
  static constexpr std::uint64_t one_use = std::uint64_t{1} << use_shift;
  static constexpr std::uint64_t withdrawn_bit = std::uint64_t{1} << 63;
  // last_used is rewritten only when it moves by more than this: fewer writes to a shared line.
  static constexpr timestamp::duration::rep last_used_resolution = 100'000;  // ns

  std::atomic<std::uint64_t> counts_{0};
  std::atomic<bool> quiesced_{false};
  std::atomic<bool> want_idle_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> waited_{0};  // leases granted with count_use false
  std::atomic<timestamp::duration::rep> last_used_{0};
};

}  // namespace warm
