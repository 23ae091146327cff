#include "call_watch.hpp"

#include <cstdio>

namespace warm {

namespace {

std::chrono::nanoseconds cpu_time(clockid_t clock) {
  timespec t{};
  if (::clock_gettime(clock, &t) != 0) return std::chrono::nanoseconds(0);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

std::string seconds(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

std::string past_limits(const call_limits& limits, const std::string& what,
                        std::chrono::nanoseconds running, std::chrono::nanoseconds cpu) {
  if (limits.cpu.count() > 0 && cpu > limits.cpu)
    return "used " + seconds(cpu) + " of CPU in one " + what + " (the limit is " +
           seconds(limits.cpu) + ")";
  if (limits.running.count() > 0 && running > limits.running)
    return "ran one " + what + " for " + seconds(running) + " (the limit is " +
           seconds(limits.running) + ")";
  return {};
}

call_watch::call_watch(call_limits limits, runaway_fn on_runaway, std::chrono::milliseconds period)
    : limits_(limits), on_runaway_(std::move(on_runaway)), period_(period) {
  if (limits_.cpu.count() > 0 || limits_.running.count() > 0)
    thread_ = std::thread([this] { run(); });
}

call_watch::~call_watch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

call_watch::call call_watch::begin(const std::string& model, const std::string& what) {
  clockid_t clock{};
  if (::pthread_getcpuclockid(::pthread_self(), &clock) != 0) clock = CLOCK_THREAD_CPUTIME_ID;
  entry e{model, what, clock, std::chrono::steady_clock::now(), cpu_time(clock)};
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.push_back(std::move(e));
  return call(this, std::prev(calls_.end()));
}

void call_watch::end(std::list<entry>::iterator it) {
  std::lock_guard<std::mutex> lock(mutex_);
  calls_.erase(it);
}

void call_watch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period_, [this] { return stopping_; })) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& c : calls_) {
      if (c.reported) continue;
      // The thread is alive while its entry is here: its clock is still its own.
      auto why = past_limits(limits_, c.what, now - c.since, cpu_time(c.clock) - c.cpu_at_start);
      if (why.empty()) continue;
      c.reported = true;
      auto model = c.model;
      lock.unlock();
      on_runaway_(model, why);
      lock.lock();
      break;  // the list may have changed meanwhile
    }
  }
}

}  // namespace warm
