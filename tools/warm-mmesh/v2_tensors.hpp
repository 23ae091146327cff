// Translation between warm's tensors and KServe V2's gRPC messages (schemas/kserve_v2.proto), for
// warm-mmesh, the bridge from warm's runtime interface to a ModelMesh model runtime. Pure logic:
// no gRPC call and no event loop here, so every rule is tested directly (mmesh_bridge_test).
//
// The runtime on the other side is an untrusted peer: every count, name, rank and byte count it
// answers is bounded before anything is allocated or multiplied, and a malformed answer is an
// error value, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kserve_v2.pb.h"
#include "warm/error.hpp"
#include "warm/model_io.hpp"

namespace warm::mmesh {

// Bounds on what the runtime may answer.
inline constexpr std::size_t max_tensors = 1024;        // inputs or outputs of one model or answer
inline constexpr std::size_t max_name_bytes = 256;      // a tensor's name
inline constexpr std::size_t max_rank = 16;             // a shape's dimensions
inline constexpr std::size_t max_message_bytes = 1024;  // a runtime's error text, as passed on
// One output's bytes may not pass this, each 0 dimension taken as 1 (so that a 0 hides no huge
// shape); the capnp link to warmd carries far less anyway.
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{1} << 40;

// warm's dtype for a V2 datatype name ("FP32" -> f32, "UINT8" -> u8, ...); nullopt for BYTES and
// any name warm does not carry.
std::optional<dtype> dtype_from_v2(std::string_view v2);
// The V2 name of a warm dtype; empty for the F8 types, which V2 has no name for.
std::string_view dtype_to_v2(dtype type);

// `text` cut to at most `max` bytes at a character boundary, invalid UTF-8 and control characters
// replaced by '?': a runtime's text made safe to put into warm's messages (and JSON).
std::string bounded_text(std::string_view text, std::size_t max = max_message_bytes);

// A model's inputs and outputs from its V2 metadata. `model_id` names it in messages.
// invalid_argument when the metadata declares no inputs or no outputs, more than max_tensors, a
// name empty, duplicated or longer than max_name_bytes, a rank above max_rank, a dimension below
// -1, or a datatype warm does not carry (BYTES: "m: the runtime declares input 'x' as BYTES,
// which warm does not carry"). Shapes are kept as declared (-1 dynamic); `batched` is true when
// every input's and output's first dimension is -1 (and none is rank 0).
expected<model_io> io_from_metadata(const std::string& model_id,
                                    const inference::ModelMetadataResponse& metadata);

// Fills `out` with an inference of `model_id` on `inputs`: model_name, and each input's name, V2
// datatype and shape with its bytes in raw_input_contents (in order). No outputs are requested:
// the runtime answers all of them. invalid_argument for a dtype V2 cannot name (F8) or a
// dimension above INT64_MAX. Moves the inputs' bytes out.
expected<void> fill_infer_request(const std::string& model_id, std::vector<tensor>&& inputs,
                                  inference::ModelInferRequest& out);

// The outputs of a V2 answer, in the answer's order, each from raw_output_contents (when the
// answer has them: then one per output) or from its typed `contents`. internal (naming the model
// and the fault) for a malformed answer: too many outputs, a bad name, datatype, rank or negative
// dimension, a byte count that overflows or does not match the shape, an element count that
// does not, a typed value out of its datatype's range, or FP16/BF16 without raw contents.
expected<std::vector<tensor>> read_infer_response(const std::string& model_id,
                                                  const inference::ModelInferResponse& answer);

}  // namespace warm::mmesh
