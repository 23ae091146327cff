// The fast path of decoding a V2 infer request (v2_codec.cpp), on simdjson: the common, valid
// request — an object of "id", "inputs", "outputs" and "parameters", each input an object of
// "name", "datatype" FP32, "shape", "data" (flat, or nested once per dimension) or the binary
// extension's "parameters": {"binary_data_size"} — decoded several times faster than the general
// parser.
//
// It declines (nullopt) anything else: a body it does not fully understand, any error, any
// bound, duplicate keys, bodies over fast_body_limit. The caller then decodes the body with the
// general parser, which gives the one answer and the one error message every request gets; so
// whatever the fast path accepts must decode to exactly what the general parser makes of it
// (v2_json_fuzz checks that on every input). Internal to src/http.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "http/v2_codec.hpp"

namespace warm::http {

// Larger bodies go to the general parser, whose memory stays a small multiple of the body; the
// fast path's parser keeps its buffers (per thread) between requests.
inline constexpr std::size_t fast_body_limit = 1 << 20;

// `json` is the JSON part of the body and `binary` what follows it (the binary extension), or
// null without Inference-Header-Content-Length.
std::optional<v2_request> fast_decode_infer_request(std::string_view json,
                                                    const std::string_view* binary,
                                                    const decode_limits& limits);

// The general parser alone (v2_codec.cpp): what decode_infer_request runs when the fast path
// declines, and what tests and the fuzzer compare the fast path's answers with.
expected<v2_request> decode_infer_request_general(std::string_view json,
                                                  const std::string_view* binary,
                                                  const decode_limits& limits);

}  // namespace warm::http
