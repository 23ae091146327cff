// One JSON number (or boolean, as 1 or 0) written as a tensor element of a V2 datatype: the rules
// every tensor in a JSON body is held to, whether its numbers are converted as they are parsed
// (the shape and datatype came first) or afterwards (v2_codec.cpp). Internal to src/http.
#pragma once

#include <cstddef>

#include "warm/safetensors.hpp"

namespace warm::http {

enum class element_fault {
  none,
  not_integer,   // an integer datatype, and the number has a fraction
  out_of_range,  // the datatype cannot hold it (an integer's range; a float that rounds to
                 // infinity)
};

// Writes `value` as one little-endian element of `type` at `at` (dtype_size(type) bytes), or
// leaves `at` as it is and answers what is wrong. Floats round to the nearest; a number past
// FLT_MAX by less than half its last place rounds down to FLT_MAX. Integers must be integral and
// in range (BOOL is UINT8: 0 or 1 is the caller's to check). Datatypes JSON cannot carry (FP8)
// answer out_of_range. Pure.
element_fault put_element(double value, dtype type, std::byte* at) noexcept;

}  // namespace warm::http
