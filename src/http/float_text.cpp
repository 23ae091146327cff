#include "http/float_text.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace warm::http {
namespace {

// "00" to "99": two digits at a time.
constexpr char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

int digit_count(std::uint32_t v) {
  return v < 10          ? 1
         : v < 100       ? 2
         : v < 1000      ? 3
         : v < 10000     ? 4
         : v < 100000    ? 5
         : v < 1000000   ? 6
         : v < 10000000  ? 7
         : v < 100000000 ? 8
                         : 9;
}

}  // namespace

char* write_shortest(char* at, float value) {
  if (std::signbit(value)) {
    *at++ = '-';
    value = -value;
  }
  if (value == 0) {
    *at++ = '0';
    return at;
  }
  // The shortest digits and their exponent: value == significand x 10^exponent once read back,
  // the significand without trailing zeros and at most 9 digits long. (fmt's Dragonbox, exported
  // by libfmt; float_text_test checks every layout against fmt's own "{}".)
  const auto decimal = fmt::detail::dragonbox::to_decimal(value);
  std::uint32_t significand = decimal.significand;
  const int exponent = decimal.exponent;
  const int n = digit_count(significand);
  // The digits, left-aligned in 16 bytes so that they move by fixed-size copies (no call).
  char digits[16] = {};
  char* p = digits + n;
  while (significand >= 100) {
    p -= 2;
    std::memcpy(p, digit_pairs + 2 * (significand % 100), 2);
    significand /= 100;
  }
  if (significand >= 10) {
    p -= 2;
    std::memcpy(p, digit_pairs + 2 * significand, 2);
  } else {
    *--p = static_cast<char>('0' + significand);
  }
  int scientific = exponent + n - 1;  // the exponent of the first digit
  if (scientific < -4 || scientific >= 16) {
    // d[.ddd]e±XX (a float's decimal exponent is within -45..38: two digits)
    at[0] = digits[0];
    at[1] = '.';
    std::memcpy(at + 2, digits + 1, 8);
    at += n > 1 ? n + 1 : 1;
    *at++ = 'e';
    *at++ = scientific < 0 ? '-' : '+';
    if (scientific < 0) scientific = -scientific;
    std::memcpy(at, digit_pairs + 2 * scientific, 2);
    return at + 2;
  }
  if (exponent >= 0) {  // an integer: the digits, then exponent zeros (n + exponent <= 16)
    std::memcpy(at, digits, 16);
    at += n;
    std::memset(at, '0', 16);
    return at + exponent;
  }
  if (n + exponent > 0) {  // ddd.ddd
    const int whole = n + exponent;
    std::memcpy(at, digits, 16);
    at += whole;
    *at++ = '.';
    std::memcpy(at, digits + whole, 8);
    return at + (n - whole);
  }
  // 0.000ddd: at most three zeros after the point (the first digit's exponent is -4 or more)
  const int zeros = -(n + exponent);
  at[0] = '0';
  at[1] = '.';
  std::memset(at + 2, '0', 8);
  at += 2 + zeros;
  std::memcpy(at, digits, 16);
  return at + n;
}

}  // namespace warm::http
