// The HTTP front's wait for an inference (src/http/infer_wait.hpp): an inline answer, a later one
// from another thread, none in time (timeout, worded as v2::wait words it), and a request dropped
// uncalled (unavailable at once, not a timeout).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "http/infer_wait.hpp"

using namespace warm;
using namespace warm::http;
using namespace std::chrono_literals;

namespace {

infer_result answer(const std::string& model) {
  infer_result r;
  r.model = model;
  r.cache_hit = true;
  return r;
}

}  // namespace

TEST_CASE("an answer given inside the call is returned without waiting") {
  auto start = std::chrono::steady_clock::now();
  auto r = wait_for_answer([](callback<infer_result> done) { done(answer("m")); }, 60s);
  REQUIRE(r);
  CHECK(r->model == "m");
  CHECK(std::chrono::steady_clock::now() - start < 10s);
}

TEST_CASE("an answer from another thread is waited for; an error is passed on as it is") {
  std::thread later;
  auto r = wait_for_answer(
      [&](callback<infer_result> done) {
        later = std::thread([done] { done(make_error(errc::not_found, "no model 'x'")); });
      },
      60s);
  later.join();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_found);
  CHECK(r.error().message == "no model 'x'");
}

TEST_CASE("no answer in time is a timeout; the late answer is dropped") {
  callback<infer_result> kept;
  auto r = wait_for_answer([&](callback<infer_result> done) { kept = std::move(done); }, 20ms);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::timeout);
  CHECK(r.error().message == "no answer within 20 ms");
  kept(answer("late"));  // the slot outlives the wait: answering late is harmless
  kept = nullptr;
  auto whole =
      wait_for_answer([&](callback<infer_result> done) { kept = std::move(done); }, 1000ms);
  CHECK(whole.error().message == "no answer within 1 s");
}

TEST_CASE("a request dropped without an answer is unavailable at once, not a timeout") {
  auto start = std::chrono::steady_clock::now();
  auto r = wait_for_answer([](callback<infer_result> done) { auto copy = done; }, 60s);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  // Dropped later, from another thread, while the caller waits.
  std::thread dropper;
  r = wait_for_answer(
      [&](callback<infer_result> done) {
        dropper = std::thread([done = std::move(done)]() mutable {
          std::this_thread::sleep_for(10ms);
          done = nullptr;
        });
      },
      60s);
  dropper.join();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
}
