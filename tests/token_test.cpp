// net::constant_time_equal (src/net/token.hpp): equality of a presented token and the expected
// one, with no early return on the position of the first difference or on a length mismatch.
#include "net/token.hpp"

#include <catch2/catch.hpp>
#include <string>

using warm::net::constant_time_equal;

namespace {
const std::string secret = "s3cret-token-0123456789abcdef";
}

TEST_CASE("equal tokens compare equal", "[token]") {
  CHECK(constant_time_equal(secret, secret));
  CHECK(constant_time_equal(std::string(secret), secret));  // a copy, not the same buffer
  CHECK(constant_time_equal("a", "a"));
}

TEST_CASE("a difference at the first or the last byte is found", "[token]") {
  std::string first = secret;
  first.front() ^= 1;
  std::string last = secret;
  last.back() ^= 1;
  CHECK_FALSE(constant_time_equal(first, secret));
  CHECK_FALSE(constant_time_equal(last, secret));
  CHECK_FALSE(constant_time_equal(secret, first));
  CHECK_FALSE(constant_time_equal(secret, last));
}

TEST_CASE("a prefix of the token is not the token, nor the token a prefix", "[token]") {
  for (std::size_t n = 0; n < secret.size(); ++n) {
    INFO("prefix length " << n);
    CHECK_FALSE(constant_time_equal(secret.substr(0, n), secret));
    CHECK_FALSE(constant_time_equal(secret, secret.substr(0, n)));
  }
}

TEST_CASE("longer and shorter tokens are refused", "[token]") {
  CHECK_FALSE(constant_time_equal(secret + "x", secret));
  CHECK_FALSE(constant_time_equal(secret + std::string(1, '\0'), secret));  // a trailing NUL
  CHECK_FALSE(constant_time_equal(secret + secret, secret));
  // Past the expected token's end, bytes equal to its first byte must not make a match.
  CHECK_FALSE(constant_time_equal(secret + std::string(8, secret.front()), secret));
  CHECK_FALSE(constant_time_equal(secret.substr(1), secret));
  CHECK_FALSE(constant_time_equal(secret.substr(0, secret.size() - 1), secret));
}

TEST_CASE("empty strings", "[token]") {
  CHECK(constant_time_equal("", ""));
  CHECK_FALSE(constant_time_equal("", secret));
  CHECK_FALSE(constant_time_equal(secret, ""));
  CHECK_FALSE(constant_time_equal(std::string(1, '\0'), ""));  // a NUL is not nothing
}

TEST_CASE("embedded NUL bytes are compared like any other", "[token]") {
  const std::string a("ab\0cd", 5);
  const std::string b("ab\0ce", 5);
  CHECK(constant_time_equal(a, a));
  CHECK_FALSE(constant_time_equal(a, b));
  CHECK_FALSE(constant_time_equal(std::string("ab"), a));
}
