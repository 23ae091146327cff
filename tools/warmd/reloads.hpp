// What warmd's main loop reloads, on SIGHUP or when a client asks over RPC (warmctl reload): the
// served models, re-read and applied whole.
#pragma once

#include <mutex>
#include <vector>

#include "config.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"

namespace warm::warmd {

// A reload asked over RPC (not a signal number): main's loop runs it.
constexpr int reload_request = -1;

// The RPC reloads waiting for main's loop, which answers them.
class reload_queue {
 public:
  // False (and `done` answered unavailable) once closed.
  bool push(callback<std::uint32_t> done) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      done(make_error(errc::unavailable, "warmd is stopping"));
      return false;
    }
    waiting_.push_back(std::move(done));
    return true;
  }
  std::vector<callback<std::uint32_t>> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(waiting_, {});
  }
  void close() {
    std::vector<callback<std::uint32_t>> left;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      left = std::exchange(waiting_, {});
    }
    for (auto& done : left)
      done(make_error(errc::unavailable, "warmd is stopping"));
  }

 private:
  std::mutex mutex_;
  bool closed_ = false;
  std::vector<callback<std::uint32_t>> waiting_;
};

// Re-reads what warmd serves and applies it whole: the number of served models, or why nothing
// changed.
expected<std::uint32_t> reload(runtime& rt, const config& c, bool serving);

}  // namespace warm::warmd
