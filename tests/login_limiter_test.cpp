// net::login_limiter on a fake clock: a peer's budget of failed logins, its refill, the retry
// hint, successes costing nothing, the memory bound on peers tracked, and the report hook.
#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "net/login_limiter.hpp"

using warm::net::login_limiter;
using namespace std::chrono_literals;

namespace {

struct fixture {
  explicit fixture(std::uint32_t per_minute, std::size_t max_peers = 4096) {
    login_limiter::options o;
    o.failures_per_minute = per_minute;
    o.max_peers = max_peers;
    o.on_failure = [this](const std::string& peer, const std::string& front, bool limited) {
      reports.emplace_back(peer, front, limited);
    };
    limiter = std::make_unique<login_limiter>(std::move(o));
  }
  login_limiter::clock::time_point now{};  // a fake clock: starts at the epoch, moved by hand
  std::vector<std::tuple<std::string, std::string, bool>> reports;
  std::unique_ptr<login_limiter> limiter;
};

}  // namespace

TEST_CASE("a peer may fail its budget at once, then one more per 60/budget seconds") {
  fixture f(3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.limiter->allow("10.0.0.1", "rpc", f.now));
    f.limiter->failed("10.0.0.1", "rpc", f.now);
  }
  std::chrono::seconds retry{0};
  CHECK_FALSE(f.limiter->allow("10.0.0.1", "rpc", f.now, &retry));
  CHECK(retry == 20s);
  CHECK(f.limiter->allow("10.0.0.2", "http", f.now));  // another peer has its own budget
  f.now += 19s;
  CHECK_FALSE(f.limiter->allow("10.0.0.1", "rpc", f.now, &retry));
  CHECK(retry == 1s);
  f.now += 1s;
  CHECK(f.limiter->allow("10.0.0.1", "rpc", f.now));
  f.limiter->failed("10.0.0.1", "rpc", f.now);
  CHECK_FALSE(f.limiter->allow("10.0.0.1", "rpc", f.now));
  // Reports: 4 wrong tokens and 3 refusals, each naming the peer and the front.
  CHECK(f.reports.size() == 7);
  CHECK(f.reports[3] == std::make_tuple(std::string("10.0.0.1"), std::string("rpc"), true));
  CHECK(f.reports[0] == std::make_tuple(std::string("10.0.0.1"), std::string("rpc"), false));
}

TEST_CASE("the budget refills to its size, no further") {
  fixture f(2);
  f.limiter->failed("p", "rpc", f.now);
  f.now += 1h;
  f.limiter->failed("p", "rpc", f.now);
  f.limiter->failed("p", "rpc", f.now);
  CHECK_FALSE(f.limiter->allow("p", "rpc", f.now));
}

TEST_CASE("successful logins cost nothing: only failed() takes from the budget") {
  fixture f(1);
  for (int i = 0; i < 100; ++i)
    CHECK(f.limiter->allow("p", "rpc", f.now));
  f.limiter->failed("p", "rpc", f.now);
  CHECK_FALSE(f.limiter->allow("p", "rpc", f.now));
}

TEST_CASE("0 per minute: never refused, failures still reported") {
  fixture f(0);
  for (int i = 0; i < 10; ++i)
    f.limiter->failed("p", "http", f.now);
  CHECK(f.limiter->allow("p", "http", f.now));
  CHECK(f.reports.size() == 10);
}

TEST_CASE("peers tracked stay within max_peers; past it new peers share one limited bucket") {
  fixture f(1, 4);
  for (int i = 0; i < 4; ++i)
    f.limiter->failed("p" + std::to_string(i), "rpc", f.now);
  CHECK(f.limiter->peers() == 4);
  // All four are limited, so a new peer cannot evict one: it lands in the shared overflow bucket.
  f.limiter->failed("q1", "rpc", f.now);
  CHECK(f.limiter->peers() <= 5);
  CHECK_FALSE(f.limiter->allow("q2", "rpc", f.now));  // shares q1's spent budget
  for (int i = 0; i < 1000; ++i)
    f.limiter->failed("spray" + std::to_string(i), "rpc", f.now);
  CHECK(f.limiter->peers() <= 5);
  // Once the tracked peers' budgets refill they are forgotten and new peers get their own again.
  f.now += 2min;
  CHECK(f.limiter->allow("fresh", "rpc", f.now));
  CHECK(f.limiter->peers() <= 5);
}

// Contract 1, the forgetting half: a new peer past max_peers first forgets the tracked peers whose
// budget has refilled, and then gets a bucket of its own; a peer still limited is remembered.
TEST_CASE(
    "past max_peers, peers whose budget refilled are forgotten and new peers get their own "
    "bucket") {
  fixture f(1, 3);
  f.limiter->failed("p0", "rpc", f.now);
  f.limiter->failed("p1", "rpc", f.now);
  f.now += 30s;
  f.limiter->failed("p2", "rpc", f.now);  // half refilled a minute after p0 and p1 failed
  REQUIRE(f.limiter->peers() == 3);
  f.now += 30s;  // p0 and p1 full again, p2 at half a token
  f.limiter->failed("a", "rpc", f.now);
  CHECK(f.limiter->peers() == 2);  // p0 and p1 forgotten; p2 and a tracked
  // b has a budget of its own: a's wrong token did not spend it.
  CHECK(f.limiter->allow("b", "rpc", f.now));
  CHECK(f.limiter->peers() == 3);
  CHECK_FALSE(f.limiter->allow("a", "rpc", f.now));
  CHECK_FALSE(f.limiter->allow("p2", "rpc", f.now));  // still limited: not forgotten, not refilled
  f.limiter->failed("b", "rpc", f.now);
  CHECK_FALSE(f.limiter->allow("b", "rpc", f.now));
}
