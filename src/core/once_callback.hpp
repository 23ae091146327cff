// A callback that answers exactly once, even when nobody calls it.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "warm/error.hpp"

namespace warm {

// A client's callback carried between actors: called at most once, and answered `unavailable`
// (or `if_dropped`, when given) if every copy is dropped uncalled (its message discarded, or its
// holder stopped with the runtime). Copyable, since CAF messages are; the copies share one
// callback.
template <class T>
class once_callback {
 public:
  once_callback() = default;
  explicit once_callback(std::function<void(expected<T>)> done)
      : once_callback(std::move(done),
                      make_error(errc::unavailable, "the runtime is shutting down")) {}
  once_callback(std::function<void(expected<T>)> done, error if_dropped)
      : state_(done ? std::make_shared<holder>(std::move(done), std::move(if_dropped)) : nullptr) {}
  void operator()(expected<T> value) const {
    if (state_) state_->call(std::move(value));
  }

 private:
  struct holder {
    holder(std::function<void(expected<T>)> d, error e)
        : done(std::move(d)), dropped(std::move(e)) {}
    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;
    ~holder() {
      if (done) done(std::move(dropped));
    }
    void call(expected<T> value) {
      if (auto d = std::exchange(done, nullptr)) d(std::move(value));
    }
    std::function<void(expected<T>)> done;
    error dropped;
  };
  std::shared_ptr<holder> state_;
};

}  // namespace warm
