// Dynamic batching's plan (src/core/batch_plan.hpp): which queued requests run together, and
// when, case by case at each rule's boundary.
#include <catch2/catch.hpp>

#include "core/batch_plan.hpp"

using warm::batching_options;
using warm::fair_share;
using warm::requests_to_run;
using us = std::chrono::microseconds;

namespace {

batching_options opts(std::uint64_t max_batch, long delay_us,
                      std::vector<std::uint64_t> preferred = {}) {
  batching_options o;
  o.max_batch = max_batch;
  o.max_queue_delay = us(delay_us);
  o.preferred_batch = std::move(preferred);
  return o;
}

}  // namespace

TEST_CASE("batching off: one request at a time; an empty queue runs nothing") {
  CHECK(requests_to_run({3, 1, 1}, us(0), opts(0, 0)) == 1);
  CHECK(requests_to_run({3, 1, 1}, us(0), opts(1, 500)) == 1);
  CHECK(requests_to_run({}, us(1000), opts(8, 0)) == 0);
}

TEST_CASE("no delay: everything queued that fits max_batch runs now") {
  CHECK(requests_to_run({1, 1, 1}, us(0), opts(8, 0)) == 3);
  CHECK(requests_to_run({3, 5, 1}, us(0), opts(8, 0)) == 2);  // 8 rows: full
  CHECK(requests_to_run({3, 6, 1}, us(0), opts(8, 0)) == 1);  // 6 does not fit beside 3
}

TEST_CASE("with a delay, a batch that is not full waits until the oldest has waited the delay") {
  auto o = opts(8, 100);
  CHECK(requests_to_run({1, 1, 1}, us(0), o) == 0);
  CHECK(requests_to_run({1, 1, 1}, us(99), o) == 0);
  CHECK(requests_to_run({1, 1, 1}, us(100), o) == 3);  // the boundary runs
  CHECK(requests_to_run({4, 4}, us(0), o) == 2);       // full: no waiting
  CHECK(requests_to_run({4, 5}, us(0), o) == 1);       // the next does not fit: full too
}

TEST_CASE("a request of max_batch rows or more runs alone, at once") {
  CHECK(requests_to_run({8, 1}, us(0), opts(8, 100)) == 1);
  CHECK(requests_to_run({20, 1}, us(0), opts(8, 100)) == 1);
  CHECK(requests_to_run({1, 20}, us(0), opts(8, 100)) == 1);  // 1 is full: 20 never fits beside it
}

TEST_CASE(
    "preferred sizes: the largest runs when formed; smaller ones cut the batch at the delay") {
  auto o = opts(8, 100, {4, 6});
  CHECK(requests_to_run({3, 3}, us(0), o) == 2);        // 6, the largest preferred size: now
  CHECK(requests_to_run({2, 2}, us(0), o) == 0);        // 4 is preferred but not the largest: wait
  CHECK(requests_to_run({2, 2}, us(100), o) == 2);      // delay over: 4
  CHECK(requests_to_run({2, 2, 1}, us(100), o) == 2);   // cut at 4; the 1 waits for the next pass
  CHECK(requests_to_run({2, 2, 2, 1}, us(0), o) == 3);  // 6 formed: now, the 1 left queued
  CHECK(requests_to_run({1, 1, 1}, us(100), o) == 3);   // no preferred prefix: all of it
  CHECK(requests_to_run({3, 3, 2}, us(0), o) == 3);     // full (8) beats preferred (6)
}

TEST_CASE("several passes of a model each take a fair share of its rows, at least one request") {
  const std::vector<std::uint64_t> ones(30, 1);
  auto o = opts(32, 0);
  // 30 queued, another pass runs 2: 16 rows each.
  CHECK(fair_share(ones, 30, 30, 2, 2, o) == 16);
  CHECK(fair_share(ones, 30, 30, 3, 2, o) == 17);  // 33 rows: rounded up
  CHECK(fair_share(ones, 30, 30, 0, 3, o) == 10);  // a third drain just started
  // The other pass runs as many or more: what is planned runs whole.
  CHECK(fair_share(ones, 14, 14, 16, 2, o) == 14);
  // One pass alone, one request planned, or preferred sizes: the plan stands.
  CHECK(fair_share(ones, 30, 30, 0, 1, o) == 30);
  CHECK(fair_share({5, 1}, 1, 6, 30, 2, o) == 1);
  CHECK(fair_share(ones, 30, 30, 2, 2, opts(32, 0, {30})) == 30);
  // With a delay the plan stands: what a cut left would not be full, and would wait for more.
  CHECK(fair_share(ones, 30, 30, 2, 2, opts(32, 1)) == 30);
  CHECK(fair_share(ones, 8, 8, 1, 2, opts(8, 60'000'000)) == 8);
  // Rows, not requests: a share of 8 holds 3 + 4; a first request over the share runs anyway.
  CHECK(fair_share({3, 4, 2, 5}, 4, 14, 2, 2, o) == 2);
  CHECK(fair_share({12, 1}, 2, 13, 1, 2, o) == 1);
  // Only the planned prefix is ever taken, whatever the share.
  CHECK(fair_share(ones, 4, 30, 100, 2, o) == 4);
}

TEST_CASE("batching options are checked") {
  CHECK(warm::check_batching(opts(8, 0, {1, 8})).empty());
  CHECK(warm::check_batching(opts(8, 0, {9})) == "preferred batch size 9 is outside 1..8");
  CHECK(warm::check_batching(opts(8, 0, {0})) == "preferred batch size 0 is outside 1..8");
  auto no_queue = opts(8, 0);
  no_queue.max_queue = 0;
  CHECK(warm::check_batching(no_queue) == "max_queue must be positive");
  CHECK(warm::check_batching(opts(0, 0, {9})).empty());  // off: nothing to check
}

TEST_CASE("batching settings are bounded, each limit itself allowed") {
  CHECK(warm::check_batching(opts(8, 60'000'000)).empty());
  CHECK(warm::check_batching(opts(8, 60'000'001)) == "max_queue_delay is over 60000000 us");
  CHECK(warm::check_batching(opts(1 << 16, 0)).empty());
  CHECK(warm::check_batching(opts((1 << 16) + 1, 0)) == "max_batch is over 65536");
  auto queue = opts(8, 0);
  queue.max_queue = 1 << 20;
  CHECK(warm::check_batching(queue).empty());
  queue.max_queue += 1;
  CHECK(warm::check_batching(queue) == "max_queue is over 1048576");
}
