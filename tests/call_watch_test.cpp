// warm-runtime's call watch (tools/warm-runtime/call_watch.hpp): which calls are past their
// limits, and that the watching thread names the model of a call that spins or sleeps past them
// and of no call that ends within them.
#include "call_watch.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using warm::call_limits;
using warm::call_watch;
using warm::past_limits;

TEST_CASE("past_limits: CPU first, then running time, each at its boundary") {
  call_limits limits{2000ms, 5000ms};
  CHECK(past_limits(limits, "inference", 1s, 2000ms).empty());  // at the limit is within it
  CHECK(past_limits(limits, "inference", 1s, 2001ms) ==
        "used 2.0 s of CPU in one inference (the limit is 2.0 s)");
  CHECK(past_limits(limits, "load", 5000ms, 0ms).empty());
  CHECK(past_limits(limits, "load", 5001ms, 0ms) == "ran one load for 5.0 s (the limit is 5.0 s)");
  CHECK(past_limits(limits, "load", 6s, 3s).find("of CPU") !=
        std::string::npos);                                                 // both: CPU named
  CHECK(past_limits(call_limits{0ms, 0ms}, "load", 1000s, 1000s).empty());  // 0: no limit
  CHECK(past_limits(call_limits{0ms, 5000ms}, "load", 1000ms, 1000s).empty());
}

namespace {

struct reports {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> seen;
  call_watch::runaway_fn fn() {
    return [this](const std::string& model, const std::string& why) {
      std::lock_guard<std::mutex> lock(mutex);
      seen.emplace_back(model, why);
    };
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return seen.size();
  }
};

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within) {
  auto until = std::chrono::steady_clock::now() + within;
  while (!done() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  return done();
}

}  // namespace

TEST_CASE("call_watch: a call spinning past its CPU limit is named, once; a short one is not") {
  reports r;
  call_watch watch({200ms, 0ms}, r.fn(), 20ms);
  {
    auto c = watch.begin("quick", "inference");
    std::this_thread::sleep_for(300ms);  // sleeping uses no CPU: within a CPU-only limit
  }
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    auto c = watch.begin("spinner", "inference");
    volatile std::uint64_t x = 0;
    while (!stop.load())
      x = x + 1;
  });
  REQUIRE(eventually([&] { return r.size() > 0; }, 5000ms));
  std::this_thread::sleep_for(100ms);  // more looks at the same call report nothing more
  stop = true;
  spinner.join();
  std::lock_guard<std::mutex> lock(r.mutex);
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].first == "spinner");
  CHECK(r.seen[0].second.find("of CPU in one inference") != std::string::npos);
}

TEST_CASE("call_watch: CPU counts from the call's start, not the thread's life") {
  reports r;
  call_watch watch({300ms, 0ms}, r.fn(), 20ms);
  std::thread worker([&] {
    // The thread burns 400 ms before its call: a pool thread's past is not the call's.
    auto start = std::chrono::steady_clock::now();
    volatile std::uint64_t x = 0;
    while (std::chrono::steady_clock::now() - start < 400ms)
      x = x + 1;
    auto c = watch.begin("fresh", "inference");
    std::this_thread::sleep_for(200ms);
  });
  worker.join();
  CHECK(r.size() == 0);
}

TEST_CASE("call_watch: a call waiting past its running limit is named; an ended one never") {
  reports r;
  call_watch watch({0ms, 150ms}, r.fn(), 20ms);
  {
    auto c = watch.begin("ends", "load");
    std::this_thread::sleep_for(50ms);
  }
  std::thread sleeper([&] {
    auto c = watch.begin("sleeper", "load");
    std::this_thread::sleep_for(600ms);
  });
  REQUIRE(eventually([&] { return r.size() > 0; }, 5000ms));
  sleeper.join();
  std::lock_guard<std::mutex> lock(r.mutex);
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].first == "sleeper");
  CHECK(r.seen[0].second.find("ran one load for") != std::string::npos);
}
