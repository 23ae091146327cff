// Tensor elements to and from JSON and text, for every dtype warm has (warm/safetensors.hpp):
// floats (F64, F32, F16, BF16, F8_E4M3, F8_E5M2) as numbers, integers (I8..I64, U8..U64) as
// integers, BOOL as true/false. What `infer` prints of an output and reads of an --input file.
//
// Pure functions of their arguments. Tensor data is little-endian (warm's wire format), which
// these functions assume the host to be (x86, arm64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "warm/error.hpp"
#include "warm/model_io.hpp"

namespace warm::ctl {

// The elements `t.data` holds: its bytes over the dtype's size (a partial element is left out).
std::size_t element_count(const tensor& t);

// Element `i` (< element_count(t)) as JSON: a number (floats; integers exactly, U64 included) or
// true/false. A NaN or infinity becomes null when printed (JSON has no such numbers).
nlohmann::ordered_json element_json(const tensor& t, std::size_t i);

// Element `i` as text: floats with 4 decimals ("-0.2500", "nan", "inf"), integers in full,
// BOOL "true"/"false".
std::string element_text(const tensor& t, std::size_t i);

// Appends `value` to t.data as one element of t.type:
//   - a float dtype takes any number, rounded to the nearest value it holds (F16, BF16, F8_E5M2:
//     too large becomes infinity; F8_E4M3 has none and saturates at +-448);
//   - an integer dtype takes a whole number in its range (2.0 is not one: JSON keeps it a float);
//   - BOOL takes true, false, 0 or 1.
// Anything else is invalid_argument naming the value and the dtype, and t is left as it was.
expected<void> append_element(tensor& t, const nlohmann::json& value);

// OCP 8-bit floats from and to float. E4M3 ("fn"): bias 7, no infinities, 0x7f/0xff NaN, largest
// 448. E5M2: IEEE half's top byte (bias 15, infinities). Rounding to nearest even.
float f8_e4m3_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_f8_e4m3(float value) noexcept;
float f8_e5m2_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_f8_e5m2(float value) noexcept;

}  // namespace warm::ctl
