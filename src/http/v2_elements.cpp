#include "http/v2_elements.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "warm/model_io.hpp"

namespace warm::http {

namespace {

template <class T>
element_fault put_integer(double v, std::byte* at) noexcept {
  if (v != std::floor(v)) return element_fault::not_integer;
  // 64-bit types stop at 2^63 (the integers past 2^53 are refused before, as inexact).
  if (v < static_cast<double>(std::numeric_limits<T>::min()) ||
      v > static_cast<double>(std::numeric_limits<T>::max()) ||
      (sizeof(T) == 8 && v >= 9223372036854775808.0))
    return element_fault::out_of_range;
  T x = static_cast<T>(v);
  std::memcpy(at, &x, sizeof(T));
  return element_fault::none;
}

}  // namespace

element_fault put_element(double v, dtype type, std::byte* at) noexcept {
  switch (type) {
    case dtype::f32:
    case dtype::f16:
    case dtype::bf16: {
      const double limit = std::numeric_limits<float>::max() + 0x1p103;
      if (!std::isfinite(v) || std::fabs(v) >= limit) return element_fault::out_of_range;
      const float f =
          std::fabs(v) > std::numeric_limits<float>::max()
              ? std::copysign(std::numeric_limits<float>::max(), static_cast<float>(v > 0 ? 1 : -1))
              : static_cast<float>(v);
      if (type == dtype::f32) {
        std::memcpy(at, &f, 4);
        return element_fault::none;
      }
      auto h = type == dtype::f16 ? float_to_half(f) : float_to_bfloat16(f);
      if ((h & 0x7fff) == (type == dtype::f16 ? 0x7c00 : 0x7f80))
        return element_fault::out_of_range;
      std::memcpy(at, &h, 2);
      return element_fault::none;
    }
    case dtype::f64:
      if (!std::isfinite(v)) return element_fault::out_of_range;
      std::memcpy(at, &v, 8);
      return element_fault::none;
    case dtype::i64:
      return put_integer<std::int64_t>(v, at);
    case dtype::i32:
      return put_integer<std::int32_t>(v, at);
    case dtype::i16:
      return put_integer<std::int16_t>(v, at);
    case dtype::i8:
      return put_integer<std::int8_t>(v, at);
    case dtype::u64:
      return put_integer<std::uint64_t>(v, at);
    case dtype::u32:
      return put_integer<std::uint32_t>(v, at);
    case dtype::u16:
      return put_integer<std::uint16_t>(v, at);
    case dtype::u8:
    case dtype::boolean:
      return put_integer<std::uint8_t>(v, at);
    default:
      return element_fault::out_of_range;
  }
}

}  // namespace warm::http
