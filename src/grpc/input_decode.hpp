// The gRPC front's input tensors: a KServe V2 ModelInferRequest's input decoded into warm's tensor,
// from its typed contents or its raw bytes. Pure; the front checks the request's shape and size
// bounds (wire_bounds.hpp) before protobuf parses it, and this checks the tensor's own.
#pragma once

#include <cstdint>
#include <string>

#include "kserve_v2.pb.h"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::grpc_front {

// An input tensor from the request: typed contents (the list of its datatype: fp32_contents for
// FP32, int64_contents for INT64, int_contents for INT8..32, uint_contents for UINT8..32, ...;
// FP16 and BF16 only as raw bytes), or `raw` when the request carries raw_input_contents. Bounds
// checked before anything is allocated for the data.
expected<tensor> decode_input(const ::inference::ModelInferRequest::InferInputTensor& in,
                              const std::string* raw, std::uint64_t max_bytes);

}  // namespace warm::grpc_front
