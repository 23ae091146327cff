// The resident memory of warm-runtime's process (what its models' code really holds, forward()'s
// allocations included), for status.rssBytes (schemas/runtime.capnp): sampled on a thread of its
// own, so that memory an inference holds only for a moment is seen too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace warm {

class rss_meter {
 public:
  // Reads `statm_fd`, an open /proc/self/statm (opened before the sandbox hides /proc; owned
  // from now on), now and then every `period`. With -1 nothing is measured and every answer is 0.
  rss_meter(int statm_fd, std::chrono::milliseconds period);
  // Stops the sampling thread and closes the descriptor.
  ~rss_meter();
  rss_meter(const rss_meter&) = delete;
  rss_meter& operator=(const rss_meter&) = delete;

  // The first sample's bytes: the process before it loaded any model.
  std::uint64_t base() const { return base_; }
  // The most bytes sampled since the previous take_peak() (a sample taken now included); the
  // peak then starts over from now. Thread-safe, as is the rest.
  std::uint64_t take_peak();
  // The peak starts over from now: after memory was freed on purpose (an unload), so the next
  // take_peak() does not report what is gone.
  void restart_peak();

 private:
  // Resident bytes now (0 when unreadable), counted into the peak.
  std::uint64_t sample();
  void run(std::chrono::milliseconds period);

  int fd_;
  std::uint64_t page_;
  std::uint64_t base_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::uint64_t peak_ = 0;  // guarded by mutex_
  bool stop_ = false;       // guarded by mutex_
  std::thread thread_;      // last: starts once the rest is set
};

}  // namespace warm
