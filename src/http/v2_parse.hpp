// The first step of decoding a V2 infer request (v2_codec.cpp): the body parsed in one pass, with
// its memory bounded by a small multiple of the body, whatever the body holds.
//
// Tensor data (`inputs[i].data`, flat or nested) is never built as JSON values. When the input's
// "datatype" and "shape" come before its "data" (as every client writes them), each number is
// written as a tensor element while it is read (v2_elements.hpp): the data takes the tensor's own
// bytes, at most its shape's, and nothing is kept for a shape past max_tensor_bytes. Otherwise
// its numbers are kept as doubles (8 bytes each), at most max_untyped_values per input, and
// converted once the datatype is known. Everything else (ids, names, shapes, parameters) becomes
// a JSON DOM of at most max_dom_values values. A body over a bound is refused while it is read,
// or costs no more memory past it. Internal to src/http.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "http/v2_elements.hpp"
#include "warm/error.hpp"
#include "warm/safetensors.hpp"

namespace warm::http {

// The numbers of one input's `data`, row-major, and the first thing wrong with them (checked
// once the input's name and shape are known).
struct data_values {
  // Typed: the input's datatype and shape came first. Its elements, written as `type`, up to
  // `expected` (the shape's count) or the first `fault` (at element `fault_at`).
  std::optional<dtype> type;
  std::vector<std::byte> bytes;
  std::uint64_t expected = 0;
  element_fault fault = element_fault::none;
  std::uint64_t fault_at = 0;
  // Untyped: the numbers, at most max_untyped_values (fewer than `count` when there were more);
  // true is 1. Empty for a known shape past max_tensor_bytes (refused anyway).
  std::vector<double> values;
  std::uint64_t count = 0;     // elements seen
  std::uint64_t booleans = 0;  // how many of them were true or false
  std::string not_a_number;    // the type name of the first element neither number nor boolean
  std::int64_t inexact = -1;   // the index of the first integer a double cannot hold exactly
  bool present = false;        // the input has a "data" key
};

struct parsed_request {
  nlohmann::json root;            // the body, each input's "data" replaced by null
  std::vector<data_values> data;  // by input index (inputs[i]); shorter when inputs are fewer
  // By input index: the first of "datatype", "shape" and "data" the input holds more than once
  // (empty: none). Such an input is refused: which one counts would be the parser's choice.
  std::vector<std::string> repeated;
};

struct parse_bounds {
  std::uint64_t max_tensor_bytes = 64ull << 20;   // per input, in its datatype's bytes
  std::uint64_t max_untyped_values = 4ull << 20;  // numbers kept per input whose data came first
  std::size_t max_dom_values = 1 << 16;           // JSON values outside tensor data
};

// invalid_argument for malformed JSON (the parser's message) or more than max_dom_values values
// outside tensor data. Nesting depth is the caller's to bound before (the parse recurses no more
// than the text nests, but the DOM's destructor does).
expected<parsed_request> parse_request(std::string_view body, const parse_bounds& bounds);

}  // namespace warm::http
