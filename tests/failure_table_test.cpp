// Failure records: per-device blocking, fail-fast with the latest error, expiry on a fake clock.
#include <catch2/catch.hpp>

#include "core/failure_table.hpp"

using namespace std::chrono_literals;

namespace {

warm::timestamp at(std::chrono::seconds s) {
  return warm::timestamp{} + s;
}
warm::error failed(const char* why) {
  return warm::make_error(warm::errc::load_failed, why);
}

}  // namespace

TEST_CASE("a failure blocks its device until it expires, then the model may retry") {
  warm::failure_table table(600s);
  const std::vector<std::string> devices{"cuda:0", "cuda:1", "host"};
  CHECK(table.first_eligible("m", devices, at(0s)) == "cuda:0");

  table.record("m", "cuda:0", at(10s), failed("oom on 0"));
  CHECK_FALSE(table.eligible("m", "cuda:0", at(11s)));
  CHECK(table.eligible("other", "cuda:0", at(11s)));
  CHECK(table.first_eligible("m", devices, at(11s)) == "cuda:1");  // retried on another device

  table.record("m", "cuda:1", at(20s), failed("oom on 1"));
  table.record("m", "host", at(30s), failed("disk gone"));
  CHECK_FALSE(table.first_eligible("m", devices, at(31s)));  // nothing eligible: fail fast
  auto latest = table.latest("m", at(31s));
  REQUIRE(latest);
  CHECK(latest->device == "host");
  CHECK(latest->error.message == "disk gone");
  CHECK(latest->expires == at(630s));

  CHECK(table.first_eligible("m", devices, at(609s)) == std::nullopt);
  CHECK(table.first_eligible("m", devices, at(610s)) == "cuda:0");  // first record expired
  CHECK(table.snapshot(at(610s)).size() == 2);
  CHECK(table.expire(at(610s)) == 1);
  CHECK(table.size() == 2);
  CHECK(table.expire(at(700s)) == 2);
  CHECK(table.size() == 0);
  CHECK_FALSE(table.latest("m", at(700s)));
}

TEST_CASE("a new failure on the same device replaces the old record; clear forgets the model") {
  warm::failure_table table(60s);
  table.record("m", "host", at(0s), failed("first"));
  table.record("m", "host", at(50s), failed("second"));
  CHECK(table.size() == 1);
  CHECK_FALSE(table.eligible("m", "host", at(100s)));  // the newer record runs until 110 s
  CHECK(table.latest("m", at(100s))->error.message == "second");
  table.record("n", "host", at(0s), failed("n"));
  table.clear("m");
  CHECK(table.eligible("m", "host", at(100s)));
  CHECK(table.size() == 1);
}

TEST_CASE("next_expiry is when the model's first record expires") {
  warm::failure_table table(600s);
  CHECK(table.next_expiry("m", at(5s)) == at(5s));  // no record: now
  table.record("m", "a", at(10s), failed("x"));
  table.record("m", "b", at(20s), failed("y"));
  CHECK(table.next_expiry("m", at(30s)) == at(610s));
  CHECK(table.next_expiry("m", at(610s)) == at(620s));
  CHECK(table.next_expiry("m", at(620s)) == at(620s));
}

// Expired records are dropped as new failures come, so a failure storm's records do not stay in
// memory for good (only the unexpired and the last quarter-expiry's worth remain).
TEST_CASE("recording drops expired records: memory follows the recent failures") {
  warm::failure_table table(60s);
  for (int i = 0; i < 1000; ++i)
    table.record("m" + std::to_string(i), "host", at(std::chrono::seconds(i % 10)), failed("x"));
  CHECK(table.size() == 1000);
  table.record("late", "host", at(69s), failed("x"));  // m* made at 0-9 s: expired at 60-69 s
  CHECK(table.size() == 1);
  for (int i = 0; i < 100; ++i)
    table.record("n" + std::to_string(i), "host", at(70s), failed("x"));
  CHECK(table.size() == 101);  // within a quarter-expiry of the last sweep: no sweep yet
  table.record("later", "host", at(131s), failed("x"));  // "late" expired at 129 s, n* at 130 s
  CHECK(table.size() == 1);
  CHECK(table.latest("later", at(131s)));
}

// A record with its own lifetime (a device whose process died: until it is expected back) lasts
// exactly that long, longer or shorter than the table's expiry, but never less than 1 ms: a
// lifetime of zero or below is raised to 1 ms, and one above 1 ms is not cut down to it.
TEST_CASE("a lasting record expires after its own lifetime, at least 1 ms") {
  warm::failure_table table(600s);
  table.record("m", "cuda:0", at(10s), failed("device lost"), 2h);
  table.record("m", "cuda:1", at(10s), failed("device lost"), 30s);
  auto records = table.snapshot(at(10s));  // by device: cuda:0, cuda:1
  REQUIRE(records.size() == 2);
  CHECK(records[0].expires == at(10s) + 2h);
  CHECK(records[1].expires == at(10s) + 30s);
  CHECK(table.next_expiry("m", at(11s)) == at(40s));
  CHECK_FALSE(table.eligible("m", "cuda:1", at(39s)));
  CHECK(table.eligible("m", "cuda:1", at(40s)));
  CHECK_FALSE(table.eligible("m", "cuda:0", at(10s) + 2h - 1ns));  // well past the table's 600 s
  CHECK(table.eligible("m", "cuda:0", at(10s) + 2h));

  table.record("n", "host", at(100s), failed("device lost"), 0ns);
  table.record("o", "host", at(100s), failed("device lost"), -5s);
  for (const char* model : {"n", "o"}) {
    INFO(model);
    CHECK(table.next_expiry(model, at(100s)) == at(100s) + 1ms);
    CHECK_FALSE(table.eligible(model, "host", at(100s)));  // blocks for the 1 ms at least
    CHECK(table.eligible(model, "host", at(100s) + 1ms));
  }
}
