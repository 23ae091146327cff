#include "rss_meter.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace warm {

rss_meter::rss_meter(int statm_fd, std::chrono::milliseconds period)
    : fd_(statm_fd), page_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {
  base_ = sample();
  if (fd_ >= 0) thread_ = std::thread([this, period] { run(period); });
}

rss_meter::~rss_meter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t rss_meter::sample() {
  if (fd_ < 0) return 0;
  // statm: "size resident shared text lib data dt", in pages; procfs renders it anew at offset 0.
  char text[128];
  auto n = ::pread(fd_, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &size, &resident) != 2) return 0;
  auto bytes = static_cast<std::uint64_t>(resident) * page_;
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = std::max(peak_, bytes);
  return bytes;
}

std::uint64_t rss_meter::take_peak() {
  auto now = sample();
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(peak_, now);
}

void rss_meter::restart_peak() {
  auto now = sample();
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = now;
}

void rss_meter::run(std::chrono::milliseconds period) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [&] { return stop_; })) {
    lock.unlock();
    sample();
    lock.lock();
  }
}

}  // namespace warm
