// The first step of decoding a V2 infer request (v2_codec.cpp): the body parsed in one pass, with
// its memory bounded by a small multiple of the body, whatever the body holds.
//
// Tensor data (`inputs[i].data`, flat or nested) is never built as JSON values: its numbers go
// straight into doubles (8 bytes each, at most max_values per input), converted to the input's
// datatype once it is known. Everything else (ids, names,
// shapes, parameters) becomes a JSON DOM of at most max_dom_values values. A body over either
// bound is refused while it is read, before it costs more. Internal to src/http.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"

namespace warm::http {

// The numbers of one input's `data`, row-major, and the first thing wrong with them (checked
// once the input's name and shape are known).
struct data_values {
  std::vector<double> values;  // at most max_values; `count` goes on counting past it; true is 1
  std::uint64_t count = 0;     // elements seen
  std::uint64_t booleans = 0;  // how many of them were true or false
  std::string not_a_number;    // the type name of the first element neither number nor boolean
  std::int64_t inexact = -1;   // the index of the first integer a double cannot hold exactly
  bool present = false;        // the input has a "data" key
};

struct parsed_request {
  nlohmann::json root;             // the body, each input's "data" replaced by null
  std::vector<data_values> data;   // by input index (inputs[i]); shorter when inputs are fewer
};

struct parse_bounds {
  std::uint64_t max_values = 16ull << 20;  // numbers kept per input's data
  std::size_t max_dom_values = 1 << 16;    // JSON values outside tensor data
};

// invalid_argument for malformed JSON (the parser's message) or more than max_dom_values values
// outside tensor data. Nesting depth is the caller's to bound before (the parse recurses no more
// than the text nests, but the DOM's destructor does).
expected<parsed_request> parse_request(std::string_view body, const parse_bounds& bounds);

}  // namespace warm::http
