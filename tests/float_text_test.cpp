// Floats as JSON text (src/http/float_text.hpp): the shortest text that reads back bit for bit,
// laid out exactly as fmt's "{}", never past its room.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "http/float_text.hpp"

using namespace warm::http;

namespace {

float from_bits(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

std::uint32_t bits_of(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// write_shortest's text of `v`, written into a buffer of canaries: false (with the reason in
// `why`) when it wrote past float_text_room or its text is longer than float_text_max.
bool written(float v, std::string& text, std::string& why) {
  char buffer[float_text_room + 16];
  std::memset(buffer, '#', sizeof buffer);
  char* end = write_shortest(buffer, v);
  text.assign(buffer, end);
  for (std::size_t i = float_text_room; i < sizeof buffer; ++i)
    if (buffer[i] != '#') {
      why = "wrote past its room";
      return false;
    }
  if (text.size() > float_text_max) {
    why = "longer than float_text_max";
    return false;
  }
  return true;
}

// Checks one value: fmt's layout, the room, and the round trip. Counts failures, reporting the
// first few.
void check(float v, int& failures) {
  std::string text, why;
  bool ok = written(v, text, why);
  std::string expected = fmt::format("{}", v);
  float back = std::strtof(text.c_str(), nullptr);
  if (ok && text == expected && bits_of(back) == bits_of(v)) return;
  if (failures++ < 5) {
    INFO("bits 0x" << std::hex << bits_of(v) << ": wrote '" << text << "', fmt writes '" << expected
                   << "' " << why);
    CHECK(false);
  }
}

}  // namespace

TEST_CASE("floats are written as fmt writes them, and read back bit for bit") {
  int failures = 0;
  std::vector<float> special{0.0f,          -0.0f,       FLT_MIN,   -FLT_MIN,     FLT_TRUE_MIN,
                             -FLT_TRUE_MIN, FLT_MAX,     -FLT_MAX,  1.0f,         -1.0f,
                             0.1f,          1e-45f,      1e-5f,     1e-4f,        9.9999e-5f,
                             1e15f,         1e16f,       9.999e15f, 123456789.0f, 1.5e-38f,
                             16777216.0f,   16777217.0f, 0.3f,      2.5f,         100.0f};
  for (float v : special)
    check(v, failures);
  // Every binary exponent, at its power of two and its neighbours (denormals included).
  for (std::uint32_t e = 0; e < 255; ++e)
    for (std::uint32_t m : {0u, 1u, 2u, 0x3fffffu, 0x400000u, 0x7ffffeu, 0x7fffffu}) {
      check(from_bits((e << 23) | m), failures);
      check(from_bits(0x80000000u | (e << 23) | m), failures);
    }
  // Around every power of ten a float can reach: where fixed and scientific notation meet, and
  // where the digit count changes.
  for (int p = -45; p <= 38; ++p) {
    float v = std::strtof(("1e" + std::to_string(p)).c_str(), nullptr);
    float down = v, up = v;
    for (int i = 0; i < 20; ++i) {
      down = std::nextafter(down, 0.0f);
      up = std::nextafter(up, FLT_MAX);
      check(down, failures);
      check(up, failures);
      check(-up, failures);
    }
    check(v, failures);
  }
  // Integers: trailing zeros written, not an exponent, up to 1e16.
  for (std::uint64_t i = 1; i < 100000; i = i * 3 + 1)
    check(static_cast<float>(i), failures);
  // Random bit patterns, and values shaped like a model's outputs.
  std::mt19937 rng(20261128);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 400000; ++i) {
    float v = from_bits(bits(rng));
    if (std::isfinite(v)) check(v, failures);
    check(normal(rng), failures);
  }
  INFO("seed 20261128");
  CHECK(failures == 0);
}
