// warm's dtypes and libtorch's scalar types, both ways: the one table the TorchScript backend and
// warm-bench's direct libtorch baseline share. Header-only; include it only where libtorch is.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "warm/safetensors.hpp"

namespace warm {

// nullopt for a dtype libtorch has no scalar type for (F8, unsigned wider than 8 bits).
inline std::optional<c10::ScalarType> torch_type(dtype type) {
  switch (type) {
    case dtype::f32:
      return c10::kFloat;
    case dtype::f16:
      return c10::kHalf;
    case dtype::bf16:
      return c10::kBFloat16;
    case dtype::f64:
      return c10::kDouble;
    case dtype::i64:
      return c10::kLong;
    case dtype::i32:
      return c10::kInt;
    case dtype::i16:
      return c10::kShort;
    case dtype::i8:
      return c10::kChar;
    case dtype::u8:
      return c10::kByte;
    case dtype::boolean:
      return c10::kBool;
    default:
      return std::nullopt;
  }
}

// nullopt for a scalar type warm has no dtype for (complex, quantized).
inline std::optional<dtype> warm_type(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return dtype::f32;
    case c10::kHalf:
      return dtype::f16;
    case c10::kBFloat16:
      return dtype::bf16;
    case c10::kDouble:
      return dtype::f64;
    case c10::kLong:
      return dtype::i64;
    case c10::kInt:
      return dtype::i32;
    case c10::kShort:
      return dtype::i16;
    case c10::kChar:
      return dtype::i8;
    case c10::kByte:
      return dtype::u8;
    case c10::kBool:
      return dtype::boolean;
    default:
      return std::nullopt;
  }
}

}  // namespace warm
