// The HTTP gate's rule 1 (http/connection_limits.hpp): connections open in all and by address,
// the last tenth kept for addresses with few open, and refusals logged at most once a second.
#include <catch2/catch.hpp>

#include <string>

#include "http/connection_limits.hpp"

using namespace warm::http;
using admission = connection_limits::admission;

namespace {

admission admit(connection_limits& l, const std::string& peer) {
  std::string line;
  return l.admit(peer, line);
}

}  // namespace

TEST_CASE("at most max_connections are open, and a closed one makes room") {
  connection_limits l(20, 0);
  for (int i = 0; i < 20; ++i)
    REQUIRE(admit(l, "10.0.0." + std::to_string(i)) == admission::admitted);
  CHECK(l.open() == 20);
  CHECK(admit(l, "10.0.1.1") == admission::full);
  CHECK(admit(l, "") == admission::full);  // a unix socket counts against the limit on all
  l.forget("10.0.0.3");
  CHECK(l.open() == 19);
  CHECK(admit(l, "10.0.1.1") == admission::admitted);
}

TEST_CASE("at most max_connections_per_address from one address; others still get in") {
  connection_limits l(100, 3);
  for (int i = 0; i < 3; ++i)
    REQUIRE(admit(l, "a") == admission::admitted);
  CHECK(admit(l, "a") == admission::address_full);
  CHECK(admit(l, "b") == admission::admitted);
  CHECK(admit(l, "") == admission::admitted);  // no address: only the limit on all
  l.forget("a");
  CHECK(admit(l, "a") == admission::admitted);
}

TEST_CASE("the last tenth of the connections is kept for addresses with fewer than four open") {
  connection_limits l(50, 0);  // reserve: 5 of 50
  for (int i = 0; i < 45; ++i)
    REQUIRE(admit(l, "busy") == admission::admitted);
  // 45 open = max - reserve: "busy" (45 open, not fewer than four) is refused; a newcomer is not.
  CHECK(admit(l, "busy") == admission::address_full);
  for (int i = 0; i < 4; ++i)
    CHECK(admit(l, "few") == admission::admitted);    // 0-3 open before
  CHECK(admit(l, "few") == admission::address_full);  // four open: no longer "fewer than four"
  CHECK(admit(l, "other") == admission::admitted);    // the 50th
  CHECK(admit(l, "third") == admission::full);
}

TEST_CASE("a refused address is logged once a second, then with the count of those not logged") {
  connection_limits l(100, 1);
  REQUIRE(admit(l, "a") == admission::admitted);
  std::string first, second;
  CHECK(l.admit("a", first) == admission::address_full);
  CHECK(first ==
        "http: refusing a connection from a: 1 connections are open from it "
        "(max_connections_per_address)");
  CHECK(l.admit("a", second) == admission::address_full);
  CHECK(second.empty());  // within the second: counted, not logged
}
