// The KServe V2 ("Open Inference Protocol") JSON bodies warm's HTTP front speaks, as pure
// functions: request bodies in, runtime values out, and back. No HTTP here; see http_front.
//
// An inference request is {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "data",
// "parameters"?}], "outputs"?: [{"name"}]}. `data` is flat or nested row-major; its element count
// must equal the shape's product, each element representable in the datatype (FP32, FP16, BF16,
// FP64, INT8..64, UINT8..64, BOOL as true/false); anything else is a clear invalid_argument.
// Nothing from the body is trusted: nesting depth, element counts and tensor bytes are bounded
// before anything is allocated for them.
//
// The binary tensor data extension: a request with the header Inference-Header-Content-Length: N
// carries its JSON in the body's first N bytes and tensor data after it. An input with
// "parameters": {"binary_data_size": K} has no "data"; its elements are the next K bytes of that
// binary part (inputs in order, little-endian), and together they must use it exactly. Each
// output of the answer is decided on its own: binary when the requested output says
// "parameters": {"binary_data": true}, JSON when it says false, and without a say of its own (or
// when the request names no outputs) as the request's "parameters": {"binary_data_output": ...}
// says, JSON by default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::http {

struct decode_limits {
  std::uint64_t max_tensor_bytes = 64ull << 20;  // per input tensor, in its datatype's bytes
};

struct v2_request {
  infer_request request;       // target left empty: the URL names the model
  std::string id;              // echoed in the response when given
  bool binary_output = false;  // the request's binary_data_output: the default of every output
  std::vector<std::string>
      outputs;  // the outputs asked for, in order; empty: all (v2::select_outputs)
  std::vector<bool>
      output_binary;  // outputs[i] as binary data: its binary_data, else binary_output
};

// Whether each output of the answer to `request` goes as binary data, in the answer's order once
// v2::select_outputs kept the outputs asked for: output_binary when the request names outputs,
// else binary_output for each of the answer's `outputs` outputs.
std::vector<bool> binary_outputs(const v2_request& request, std::size_t outputs);

// Parses a V2 infer request body; `json_length` is Inference-Header-Content-Length when the
// request has it. invalid_argument (with what is wrong) for malformed JSON, missing or mistyped
// fields, an unknown datatype, a data element count that does not match the shape,
// non-numeric or out-of-range elements, a tensor over
// limits.max_tensor_bytes, a json_length past the body, binary_data_size without a binary part,
// or sizes that do not match the shapes or do not add up to the binary part.
expected<v2_request> decode_infer_request(std::string_view body, const decode_limits& limits = {},
                                          std::optional<std::size_t> json_length = std::nullopt);

// {"model_name", "id"?, "parameters": {"warm_cache_hit", "warm_load_wait_ms"}, "outputs": [...]}
// with output data flat in each output's datatype, floats in their shortest round-trip form
// (non-finite as null). An output whose `binary` entry is true (entries by result.outputs'
// order; a missing one is false) has "parameters": {"binary_data_size": K} instead of "data",
// and its K bytes (little-endian) follow the JSON, binary outputs in output order; *json_length,
// when given, is set to the JSON's length (the answer's Inference-Header-Content-Length).
std::string encode_infer_response(const infer_result& result, const std::string& id,
                                  const std::vector<bool>& binary,
                                  std::size_t* json_length = nullptr);
// The same with every output binary (`binary`) or every output JSON.
std::string encode_infer_response(const infer_result& result, const std::string& id,
                                  bool binary = false, std::size_t* json_length = nullptr);

// GET /v2/models/{m}: {"name", "versions", "platform", "inputs", "outputs", "parameters"}, the
// model's own tensors with -1 for dynamic dimensions (the batch). `name` is what the client asked
// for (a vmodel id stays a vmodel id); "versions" lists `versions` (every version `name` serves,
// v2::served_versions) as strings.
std::string encode_model_metadata(const std::string& name, const model_metadata& meta,
                                  const std::vector<std::uint64_t>& versions);

// POST /v2/repository/index: [{"name", "version"?, "state", "reason"}], Triton's states
// (READY, UNAVAILABLE, LOADING) with warm's own state in "warm_state".
std::string encode_repository_index(const std::vector<model_status>& models);

// {"error": message}. Like every encoder here it never throws for bad text: bytes that are not
// valid UTF-8 (a model name, input quoted in a parse error) are written as U+FFFD.
std::string encode_error(std::string_view message);

// The HTTP status for an error code: 400 bad input, 404 unknown, 503 load failure or no room,
// 504 timeout, 500 only for warm's own bugs.
int http_status(errc code) noexcept;

}  // namespace warm::http
