// Floats as JSON number text, fast: the V2 codec writes every FP32 element of a JSON answer with
// it, so its cost is paid 256 times for a 256-wide output. Pure; no state; any thread.
#pragma once

#include <cstddef>

namespace warm::http {

// The longest text write_shortest takes: a negative integer of 16 digits, "-1125899840000000"
// (scientific ones take at most 15: "-1.17549435e-38").
inline constexpr std::size_t float_text_max = 17;
// The bytes past `at` write_shortest may write scratch into (beyond the text it returns): the
// caller keeps this many free.
inline constexpr std::size_t float_text_room = 32;

// Writes finite `value` at `at` (float_text_room bytes free) and answers the end of its text: the
// shortest decimal that reads back as the same float (Dragonbox's digits, as fmt gives them), laid
// out exactly as fmt's "{}" lays it out: "1.5", "100", "0.001", "1e-05", "3.4028235e+38" — fixed
// notation for decimal exponents -4 to 15, scientific otherwise, with a sign and at least two
// exponent digits; 0 is "0" and -0 is "-0". The caller must not pass NaN or an infinity.
char* write_shortest(char* at, float value);

}  // namespace warm::http
