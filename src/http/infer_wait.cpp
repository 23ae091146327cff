#include "http/infer_wait.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "warm/runtime.hpp"

namespace warm::http {
namespace {

// Where the answer lands: filled once, by the callback or (dropped uncalled) by its guard.
struct answer_slot {
  std::mutex mutex;
  std::condition_variable filled;
  std::optional<expected<infer_result>> result;  // under mutex; the first answer stays

  void fill(expected<infer_result> r) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (result) return;
      result.emplace(std::move(r));
    }
    filled.notify_one();
  }
};

// Held by every copy of the callback: when the last goes uncalled, the waiter gets unavailable.
struct answer_guard {
  explicit answer_guard(std::shared_ptr<answer_slot> s) : slot(std::move(s)) {}
  answer_guard(const answer_guard&) = delete;
  answer_guard& operator=(const answer_guard&) = delete;
  ~answer_guard() {
    {
      std::lock_guard<std::mutex> lock(slot->mutex);
      if (slot->result) return;  // answered (no copy is left to answer twice)
    }
    slot->fill(make_error(errc::unavailable, "the warm runtime stopped before answering"));
  }
  std::shared_ptr<answer_slot> slot;
};

}  // namespace

expected<infer_result> wait_for_answer(const std::function<void(callback<infer_result>)>& start,
                                       std::chrono::milliseconds limit) {
  auto slot = std::make_shared<answer_slot>();
  {
    auto guard = std::make_shared<answer_guard>(slot);
    start(
        [guard = std::move(guard)](expected<infer_result> r) { guard->slot->fill(std::move(r)); });
  }
  std::unique_lock<std::mutex> lock(slot->mutex);
  if (!slot->filled.wait_for(lock, limit, [&] { return slot->result.has_value(); }))
    return make_error(
        errc::timeout,
        "no answer within " + (limit.count() % 1000 ? std::to_string(limit.count()) + " ms"
                                                    : std::to_string(limit.count() / 1000) + " s"));
  return std::move(*slot->result);
}

expected<infer_result> infer_and_wait(runtime& rt, infer_request request,
                                      std::chrono::milliseconds limit) {
  return wait_for_answer(
      [&](callback<infer_result> done) { rt.infer(std::move(request), std::move(done)); }, limit);
}

}  // namespace warm::http
