// crash_suspects on a fake clock: a model alone in flight is blamed at once; among several, the
// one in flight at two crashes within the window; strikes past the window are forgotten; a
// blamed model starts afresh.
#include <catch2/catch.hpp>

#include "core/crash_suspects.hpp"

using namespace std::chrono_literals;
using strings = std::vector<std::string>;

namespace {
warm::timestamp at(std::chrono::seconds s) {
  return warm::timestamp{} + s;
}
}  // namespace

TEST_CASE("a model alone in flight at a crash is blamed at once") {
  warm::crash_suspects s(2, 600s);
  CHECK(s.crashed({"bad"}, at(1s)) == strings{"bad"});
  CHECK(s.crashed({"bad", "bad"}, at(2s)) == strings{"bad"});  // two of its requests: still alone
  CHECK(s.crashed({}, at(3s)).empty());
  CHECK(s.tracked() == 0);
}

TEST_CASE("among several, the model in flight at two crashes is blamed, not its neighbours") {
  warm::crash_suspects s(2, 600s);
  CHECK(s.crashed({"bad", "a", "b"}, at(10s)).empty());  // one strike each
  CHECK(s.tracked() == 3);
  CHECK(s.crashed({"c", "bad"}, at(20s)) == strings{"bad"});
  CHECK(s.crashed({"a", "d"}, at(30s)) == strings{"a"});  // a's second strike: blamed too
  CHECK(s.tracked() == 3);                                // b, c, d
}

TEST_CASE("strikes further apart than the window do not add up") {
  warm::crash_suspects s(2, 600s);
  CHECK(s.crashed({"a", "b"}, at(0s)).empty());
  CHECK(s.crashed({"a", "c"}, at(600s)) == strings{"a"});  // exactly the window: still counts
  CHECK(s.crashed({"b", "c"}, at(1201s)).empty());         // b's strike is 1201 s old, c's 601 s
  CHECK(s.crashed({"b", "x"}, at(1202s)) == strings{"b"});
}

TEST_CASE("a blamed model starts afresh, and strikes needed may be 1") {
  warm::crash_suspects s(2, 600s);
  CHECK(s.crashed({"bad"}, at(0s)) == strings{"bad"});
  CHECK(s.crashed({"bad", "a"}, at(1s)).empty());  // its earlier blame left no strike behind
  warm::crash_suspects every(1, 600s);
  CHECK(every.crashed({"b", "a"}, at(0s)) == strings{"a", "b"});
}
