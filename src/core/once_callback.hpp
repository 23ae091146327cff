// A callback that answers exactly once, even when nobody calls it.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "warm/error.hpp"

namespace warm {

// A client's callback carried between actors: called at most once, and answered `unavailable`
// if every copy is dropped uncalled (its message discarded, or its holder stopped with the
// runtime). Copyable, since CAF messages are; the copies share one callback.
template <class T>
class once_callback {
 public:
  once_callback() = default;
  explicit once_callback(std::function<void(expected<T>)> done)
      : state_(done ? std::make_shared<holder>(std::move(done)) : nullptr) {}
  void operator()(expected<T> value) const {
    if (state_) state_->call(std::move(value));
  }

 private:
  struct holder {
    explicit holder(std::function<void(expected<T>)> d) : done(std::move(d)) {}
    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;
    ~holder() {
      if (done) done(make_error(errc::unavailable, "the runtime is shutting down"));
    }
    void call(expected<T> value) {
      if (auto d = std::exchange(done, nullptr)) d(std::move(value));
    }
    std::function<void(expected<T>)> done;
  };
  std::shared_ptr<holder> state_;
};

}  // namespace warm
