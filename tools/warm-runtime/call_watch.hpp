// Bounds on one call into model code in warm-runtime (a load, an inference). A TorchScript model is
// code, and code that never returns (a loop in forward(), a __setstate__ that waits forever) cannot
// be stopped inside a thread: it would hold a worker and a core until the process ends. The watch
// looks at every call in progress every `period`; one past its limits names its model to
// `on_runaway`, whose caller ends the process (warmd then fails the model that was running and
// starts the runtime again; docs/runtimes.md).
//
// Limits, each 0 for none:
//   - cpu: the CPU time of the thread running the call (the process's per-thread clock; the
//     threads a backend fans out to are bounded by `running`);
//   - running: the call's time since it began, whatever it did (sleeps and waits included).
// An rlimit cannot do this: RLIMIT_CPU counts the process's whole life, which a runtime that
// serves for weeks would reach.
#pragma once

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace warm {

struct call_limits {
  std::chrono::milliseconds cpu{60'000};
  std::chrono::milliseconds running{300'000};
};

// Why a call that has run for `running` and used `cpu` of its thread's CPU is past `limits`
// ("used 61.2 s of CPU in one inference (the limit is 60 s)"); empty while it is within them.
// `what` names the call ("inference", "load"). Pure.
std::string past_limits(const call_limits& limits, const std::string& what,
                        std::chrono::nanoseconds running, std::chrono::nanoseconds cpu);

class call_watch {
 public:
  using runaway_fn = std::function<void(const std::string& model, const std::string& why)>;

  // Starts the watching thread. `on_runaway` runs on it, at most once per call (it is expected
  // to end the process); limits of 0 and 0 watch nothing.
  call_watch(call_limits limits, runaway_fn on_runaway,
             std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~call_watch();  // stops and joins the thread
  call_watch(const call_watch&) = delete;
  call_watch& operator=(const call_watch&) = delete;

  class call;
  // Registers a call of model `model` starting now on the calling thread, until the returned
  // object is destroyed (on the same thread).
  call begin(const std::string& model, const std::string& what);

 private:
  struct entry {
    std::string model;
    std::string what;
    clockid_t clock;  // the running thread's CPU clock
    std::chrono::steady_clock::time_point since;
    std::chrono::nanoseconds cpu_at_start;
    bool reported = false;
  };
  void run();
  void end(std::list<entry>::iterator it);

  const call_limits limits_;
  const runaway_fn on_runaway_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;  // guards calls_ and stopping_
  std::condition_variable wake_;
  std::list<entry> calls_;
  bool stopping_ = false;
  std::thread thread_;

 public:
  class call {
   public:
    call(call&& other) noexcept : watch_(other.watch_), it_(other.it_) { other.watch_ = nullptr; }
    call& operator=(call&&) = delete;
    ~call() {
      if (watch_) watch_->end(it_);
    }

   private:
    friend class call_watch;
    call(call_watch* w, std::list<entry>::iterator it) : watch_(w), it_(it) {}
    call_watch* watch_;
    std::list<entry>::iterator it_;
  };
};

}  // namespace warm
