// Collects N answers that arrive on different threads (one per actor asked) and hands them over
// once all are in. Each answer writes its own slot; the last one to arrive, as ordered by an
// acq_rel counter, sees every slot and calls `done`. No lock.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace warm {

template <class T>
class gather : public std::enable_shared_from_this<gather<T>> {
 public:
  // `done` runs exactly once, on the thread of the last answer (or here when count is 0).
  static std::shared_ptr<gather> create(std::size_t count,
                                        std::function<void(std::vector<T>)> done) {
    auto g = std::shared_ptr<gather>(new gather(count, std::move(done)));
    if (count == 0) g->finish();
    return g;
  }

  // Stores answer `index` (each index exactly once).
  void set(std::size_t index, T value) {
    items_[index] = std::move(value);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
  }

 private:
  gather(std::size_t count, std::function<void(std::vector<T>)> done)
      : items_(count), remaining_(count), done_(std::move(done)) {}
  void finish() { done_(std::move(items_)); }

  std::vector<T> items_;
  std::atomic<std::size_t> remaining_;
  std::function<void(std::vector<T>)> done_;
};

}  // namespace warm
