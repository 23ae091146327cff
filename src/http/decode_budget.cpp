#include "http/decode_budget.hpp"

#include <utility>

namespace warm::http {

decode_budget::ticket& decode_budget::ticket::operator=(ticket&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = std::exchange(o.budget_, nullptr);
    bytes_ = o.bytes_;
  }
  return *this;
}

void decode_budget::ticket::release() {
  if (!budget_) return;
  {
    std::lock_guard<std::mutex> lock(budget_->mutex_);
    budget_->held_ -= bytes_;
  }
  budget_->freed_.notify_all();
  budget_ = nullptr;
}

decode_budget::ticket decode_budget::acquire(std::uint64_t bytes, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto fits = [&] { return held_ == 0 || (bytes <= capacity_ && held_ <= capacity_ - bytes); };
  if (!freed_.wait_for(lock, wait, fits)) return {};
  held_ += bytes;
  return ticket(this, bytes);
}

std::uint64_t decode_budget::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

}  // namespace warm::http
