// net::constant_time_equal (src/net/token.hpp): equality of a presented token and the expected
// one, with no early return on the position of the first difference or on a length mismatch.
// And the cluster's peer login proofs (src/net/peer_proof.hpp), against values computed with
// Python's hmac module.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "net/peer_proof.hpp"
#include "net/token.hpp"

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

namespace {

std::string hex(const std::string& bytes) {
  std::string out;
  char digits[3];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    out += digits;
  }
  return out;
}

}  // namespace

TEST_CASE("peer proofs are HMAC-SHA256 over the role and the length-prefixed fields",
          "[peer_proof]") {
  using warm::net::peer_proof;
  using warm::net::peer_role;
  const std::string s(32, 'S'), c(32, 'C');
  // hmac.new(b"cluster-token", f(b"warm peer login") + f(S) + f(C) + f(b"10.0.0.5:7000"), sha256),
  // where f(x) = struct.pack("<Q", len(x)) + x.
  CHECK(hex(peer_proof("cluster-token", peer_role::caller, s, c, "10.0.0.5:7000")) ==
        "f43edc345a23ce66eafee590229e5652ccea229f87c37187dc82f77443a09efe");
  CHECK(hex(peer_proof("cluster-token", peer_role::listener, s, c, "10.0.0.5:7000")) ==
        "08decbf0b3f736d77557d6feade43c47f77e5e008e13fa2f448fc687e1da3c39");
}

TEST_CASE("a peer proof matches only its own token, role, nonces and address", "[peer_proof]") {
  using warm::net::peer_proof;
  using warm::net::peer_proof_matches;
  using warm::net::peer_role;
  const std::string token = "cluster-token", s = warm::net::peer_nonce(),
                    c = warm::net::peer_nonce();
  const std::string address = "10.0.0.5:7000";
  auto proof = peer_proof(token, peer_role::caller, s, c, address);
  CHECK(peer_proof_matches(proof, token, peer_role::caller, s, c, address));
  CHECK_FALSE(
      peer_proof_matches(proof, token, peer_role::listener, s, c, address));  // not an answer
  CHECK_FALSE(peer_proof_matches(proof, "cluster-tokem", peer_role::caller, s, c, address));
  CHECK_FALSE(
      peer_proof_matches(proof, token, peer_role::caller, c, s, address));  // nonces swapped
  CHECK_FALSE(peer_proof_matches(proof, token, peer_role::caller, s, c, "10.0.0.6:7000"));
  CHECK_FALSE(peer_proof_matches(proof.substr(0, 31), token, peer_role::caller, s, c, address));
  // Length prefixes: moving a byte from one field to the next gives another proof.
  CHECK(peer_proof(token, peer_role::caller, "ab", "c", address) !=
        peer_proof(token, peer_role::caller, "a", "bc", address));
}

TEST_CASE("peer nonces are fresh random bytes", "[peer_proof]") {
  auto a = warm::net::peer_nonce(), b = warm::net::peer_nonce();
  CHECK(a.size() == warm::net::peer_nonce_bytes);
  CHECK(a != b);
}
