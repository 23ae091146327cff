// How a gRPC status from a ModelMesh runtime becomes one of warm's errors (and so a
// schemas/runtime.capnp Error). Pure: tested without a runtime (mmesh_bridge_test).
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <string>
#include <string_view>

#include "warm/error.hpp"

namespace warm::mmesh {

// Which call failed: the code for a status without a closer meaning depends on it.
enum class call_kind {
  load,   // loadModel, modelSize, ModelMetadata during a load: load_failed
  infer,  // ModelInfer: internal
  other,  // unloadModel and the rest: internal
};

// The error for a failed call on `model_id`: INVALID_ARGUMENT and FAILED_PRECONDITION ->
// invalid_argument, NOT_FOUND -> not_found, RESOURCE_EXHAUSTED -> capacity_exhausted,
// UNAVAILABLE -> unavailable, DEADLINE_EXCEEDED -> timeout, anything else -> load_failed for a
// load and internal otherwise. The message is "<model_id>: <what> <runtime's message>", the
// runtime's part made safe and cut to max_message_bytes (bounded_text). `what` names the call
// ("loadModel failed:"). OK is not an error: the caller never passes it.
warm::error error_from_status(grpc::StatusCode code, std::string_view runtime_message,
                              const std::string& model_id, std::string_view what, call_kind kind);

// The code's name ("UNAVAILABLE"), for messages.
std::string_view status_code_name(grpc::StatusCode code);

}  // namespace warm::mmesh
