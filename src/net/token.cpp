#include "net/token.hpp"

#include <climits>
#include <cstddef>

namespace warm::net {

namespace {

constexpr unsigned size_bits = sizeof(std::size_t) * CHAR_BIT;

// 1 when x != 0, else 0, without a branch.
std::size_t nonzero(std::size_t x) noexcept {
  return (x | (0 - x)) >> (size_bits - 1);
}

// All ones when a < b, else 0, without a branch. Both are object sizes or indices, so below
// SIZE_MAX / 2, and a - b wraps to a value with its top bit set exactly when a < b.
std::size_t less_mask(std::size_t a, std::size_t b) noexcept {
  return 0 - ((a - b) >> (size_bits - 1));
}

}  // namespace

bool constant_time_equal(std::string_view presented, std::string_view expected) noexcept {
  static constexpr char empty_byte = 0;
  const char* e = expected.empty() ? &empty_byte : expected.data();  // rule 3: not a secret
  const std::size_t n = expected.size();

  // Rule 1: the length difference goes into the result, not into an early return.
  std::size_t diff = nonzero(presented.size() ^ n);
  for (std::size_t i = 0; i < presented.size(); ++i) {
    // Rule 2: past expected's end, index 0 (same loop body, no branch on n).
    std::size_t j = i & less_mask(i, n);
    diff |= static_cast<unsigned char>(presented[i] ^ e[j]);
  }
  return diff == 0;
}

}  // namespace warm::net
