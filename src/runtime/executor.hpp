// A fixed pool of threads running submitted tasks in submission order: where inferences run after
// a miss (never on an actor's thread). oneTBB's arenas were tried first; on a 2-core machine TBB
// caps its workers at cores - 1 process-wide, which left one thread for all misses.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace warm {

class executor {
 public:
  // Starts `threads` threads (at least 1).
  explicit executor(unsigned threads);
  // Runs every task already submitted, and those they submit, then joins the threads. Nothing
  // else may submit once the destructor has started.
  ~executor();
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  // Queues `task`; thread-safe.
  void submit(std::function<void()> task);

  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }

  // Whether tasks wait for a thread: a task that could go on (a batcher's drain) goes to the back
  // of the line instead, so one model's backlog does not hold the threads from the others.
  bool others_waiting();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace warm
