#include "tensor_values.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace warm::ctl {
namespace {

template <class T>
T load(const tensor& t, std::size_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(tensor& t, T v) {
  auto at = t.data.size();
  t.data.resize(at + sizeof(T));
  std::memcpy(t.data.data() + at, &v, sizeof(T));
}

bool is_float(dtype type) {
  switch (type) {
    case dtype::f64:
    case dtype::f32:
    case dtype::f16:
    case dtype::bf16:
    case dtype::f8_e4m3:
    case dtype::f8_e5m2:
      return true;
    default:
      return false;
  }
}

// Element i of a float dtype, widened.
double float_at(const tensor& t, std::size_t i) {
  switch (t.type) {
    case dtype::f64:
      return load<double>(t, i);
    case dtype::f32:
      return load<float>(t, i);
    case dtype::f16:
      return half_to_float(load<std::uint16_t>(t, i));
    case dtype::bf16:
      return bfloat16_to_float(load<std::uint16_t>(t, i));
    case dtype::f8_e4m3:
      return f8_e4m3_to_float(load<std::uint8_t>(t, i));
    default:
      return f8_e5m2_to_float(load<std::uint8_t>(t, i));
  }
}

bool is_signed(dtype type) {
  return type == dtype::i64 || type == dtype::i32 || type == dtype::i16 || type == dtype::i8;
}

// Element i of a signed integer dtype.
std::int64_t signed_at(const tensor& t, std::size_t i) {
  switch (t.type) {
    case dtype::i64:
      return load<std::int64_t>(t, i);
    case dtype::i32:
      return load<std::int32_t>(t, i);
    case dtype::i16:
      return load<std::int16_t>(t, i);
    default:
      return load<std::int8_t>(t, i);
  }
}

// Element i of an unsigned integer dtype or BOOL.
std::uint64_t unsigned_at(const tensor& t, std::size_t i) {
  switch (t.type) {
    case dtype::u64:
      return load<std::uint64_t>(t, i);
    case dtype::u32:
      return load<std::uint32_t>(t, i);
    case dtype::u16:
      return load<std::uint16_t>(t, i);
    default:
      return load<std::uint8_t>(t, i);  // U8, BOOL
  }
}

// The range of an integer dtype.
template <class T>
bool fits(std::int64_t v) {
  return v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
         (v < 0 || static_cast<std::uint64_t>(v) <=
                       static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
}

expected<void> not_a(const nlohmann::json& value, dtype type, const char* why) {
  return make_error(errc::invalid_argument, "value " + value.dump() + " is not " + why + " (" +
                                                std::string(to_string(type)) + ")");
}

expected<void> append_float(tensor& t, double v) {
  switch (t.type) {
    case dtype::f64:
      store(t, v);
      break;
    case dtype::f32:
      store(t, static_cast<float>(v));
      break;
    case dtype::f16:
      store(t, float_to_half(static_cast<float>(v)));
      break;
    case dtype::bf16:
      store(t, float_to_bfloat16(static_cast<float>(v)));
      break;
    case dtype::f8_e4m3:
      store(t, float_to_f8_e4m3(static_cast<float>(v)));
      break;
    default:
      store(t, float_to_f8_e5m2(static_cast<float>(v)));
      break;
  }
  return {};
}

// An integer in signed 64 bits (a JSON integer) into t's integer dtype, when it fits.
expected<void> append_integer(tensor& t, std::int64_t v, const nlohmann::json& value) {
  bool ok = false;
  switch (t.type) {
    case dtype::i64:
      ok = true;
      store(t, v);
      break;
    case dtype::i32:
      if ((ok = fits<std::int32_t>(v))) store(t, static_cast<std::int32_t>(v));
      break;
    case dtype::i16:
      if ((ok = fits<std::int16_t>(v))) store(t, static_cast<std::int16_t>(v));
      break;
    case dtype::i8:
      if ((ok = fits<std::int8_t>(v))) store(t, static_cast<std::int8_t>(v));
      break;
    case dtype::u64:
      if ((ok = v >= 0)) store(t, static_cast<std::uint64_t>(v));
      break;
    case dtype::u32:
      if ((ok = fits<std::uint32_t>(v))) store(t, static_cast<std::uint32_t>(v));
      break;
    case dtype::u16:
      if ((ok = fits<std::uint16_t>(v))) store(t, static_cast<std::uint16_t>(v));
      break;
    case dtype::u8:
      if ((ok = fits<std::uint8_t>(v))) store(t, static_cast<std::uint8_t>(v));
      break;
    case dtype::boolean:
      if ((ok = v == 0 || v == 1)) store(t, static_cast<std::uint8_t>(v));
      break;
    default:
      break;
  }
  if (!ok)
    return not_a(value, t.type, t.type == dtype::boolean ? "true, false, 0 or 1" : "in range");
  return {};
}

std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace

std::size_t element_count(const tensor& t) {
  return t.data.size() / dtype_size(t.type);
}

nlohmann::ordered_json element_json(const tensor& t, std::size_t i) {
  if (is_float(t.type)) return float_at(t, i);
  if (is_signed(t.type)) return signed_at(t, i);
  if (t.type == dtype::boolean) return unsigned_at(t, i) != 0;
  return unsigned_at(t, i);
}

std::string element_text(const tensor& t, std::size_t i) {
  if (is_float(t.type)) return float_text(float_at(t, i));
  if (is_signed(t.type)) return std::to_string(signed_at(t, i));
  if (t.type == dtype::boolean) return unsigned_at(t, i) ? "true" : "false";
  return std::to_string(unsigned_at(t, i));
}

expected<void> append_element(tensor& t, const nlohmann::json& value) {
  if (is_float(t.type)) {
    if (!value.is_number()) return not_a(value, t.type, "a number");
    return append_float(t, value.get<double>());
  }
  if (t.type == dtype::boolean && value.is_boolean())
    return append_integer(t, value.get<bool>() ? 1 : 0, value);
  if (!value.is_number_integer())
    return not_a(value, t.type, t.type == dtype::boolean ? "true, false, 0 or 1" : "an integer");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t{INT64_MAX}) {
    if (t.type != dtype::u64) return not_a(value, t.type, "in range");
    store(t, value.get<std::uint64_t>());
    return {};
  }
  return append_integer(t, value.get<std::int64_t>(), value);
}

float f8_e4m3_to_float(std::uint8_t bits) noexcept {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

std::uint8_t float_to_f8_e4m3(float value) noexcept {
  const std::uint8_t sign = std::signbit(value) ? 0x80u : 0u;
  if (std::isnan(value)) return sign | 0x7fu;
  const float a = std::fabs(value);
  if (a >= 448.0f) return sign | 0x7eu;  // the largest finite value: no infinities
  if (a < std::ldexp(1.0f, -6)) {        // subnormal, steps of 2^-9 (8 steps: the smallest normal)
    return sign | static_cast<std::uint8_t>(std::nearbyint(std::ldexp(a, 9)));
  }
  int e;
  const float fraction = std::frexp(a, &e);  // a = fraction * 2^e, fraction in [0.5, 1)
  int exponent = e - 1 + 7;
  int mantissa = static_cast<int>(std::nearbyint((2.0f * fraction - 1.0f) * 8.0f));
  if (mantissa == 8) mantissa = 0, ++exponent;
  if (exponent > 15 || (exponent == 15 && mantissa == 7)) return sign | 0x7eu;
  return sign | static_cast<std::uint8_t>((exponent << 3) | mantissa);
}

float f8_e5m2_to_float(std::uint8_t bits) noexcept {
  return half_to_float(static_cast<std::uint16_t>(bits << 8));
}

std::uint8_t float_to_f8_e5m2(float value) noexcept {
  const std::uint16_t h = float_to_half(value);
  if ((h & 0x7fffu) > 0x7c00u) return static_cast<std::uint8_t>((h >> 8) | 0x02u);  // NaN stays NaN
  return static_cast<std::uint8_t>((h + 0x7fu + ((h >> 8) & 1u)) >> 8);
}

}  // namespace warm::ctl
