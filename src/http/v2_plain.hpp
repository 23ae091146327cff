// The plainest V2 infer request, decoded in one pass over its bytes (internal to src/http):
//
//   {"inputs":[{"name":"N","shape":[D,...],"datatype":"FP32","data":[x,...]}]}
//
// exactly these keys in this order, JSON whitespace anywhere between tokens, the name printable
// ASCII without quote or backslash, each dimension a positive integer of at most 18 digits, the
// data flat. It is what most clients send for one FP32 tensor, and the V2 front's commonest body:
// here it costs no parser document (no per-thread buffers to bring back into the cache) and its
// numbers go straight into the tensor.
//
// A number is taken only where its float is certain without a general algorithm: an integer of at
// most 19 digits within int64, read as the general parser reads it (through int64, so "-0" is 0);
// any other of at most 19 significant digits whose decimal exponent lies within ±22 of them, read
// by Clinger's exact method (the digits as a double times or over an exact power of ten, one
// rounding), then narrowed to float as the other parsers narrow it. It declines (nullopt)
// everything else — any other shape of request, another number, a value out of float range, an
// element count that is not the shape's, a tensor over limits.max_tensor_bytes — and the caller
// goes on to the simdjson fast path and the general parser, which decide. So whatever it accepts
// must decode exactly as they do (v2_plain_test, and v2_json_fuzz on every input, check that).
#pragma once

#include <optional>
#include <string_view>

#include "http/v2_codec.hpp"

namespace warm::http {

std::optional<v2_request> plain_decode_infer_request(std::string_view json,
                                                     const decode_limits& limits);

}  // namespace warm::http
