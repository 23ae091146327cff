#include "runtime/executor.hpp"

#include <algorithm>

namespace warm {

executor::executor(unsigned threads) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i)
    threads_.emplace_back([this] { run(); });
}

executor::~executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void executor::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

bool executor::others_waiting() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !tasks_.empty();
}

void executor::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything ran
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace warm
