// A barrier for two threads that must leave it together, round after round: for stress tests
// that make two operations race on purpose. The waiter spins first, so both leave within a
// cache-line transfer of each other (a race a few instructions wide then happens often, not by
// luck); past a few thousand spins it yields, so a loaded machine or a sanitizer build still
// makes progress.
#pragma once

#include <atomic>
#include <thread>

namespace warm::test {

class round_barrier {
 public:
  // Blocks until the other thread has arrived too (exactly two threads use one barrier).
  void arrive_and_wait() {
    const int generation = generation_.load();
    if (arrived_.fetch_add(1) == 1) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    for (int spins = 0; generation_.load() == generation; ++spins)
      if (spins > 20000) std::this_thread::yield();
  }

 private:
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

}  // namespace warm::test
