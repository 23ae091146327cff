#include "status_map.hpp"

#include "v2_tensors.hpp"

namespace warm::mmesh {

std::string_view status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "an unknown status";
  }
}

warm::error error_from_status(grpc::StatusCode code, std::string_view runtime_message,
                              const std::string& model_id, std::string_view what, call_kind kind) {
  errc out;
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      out = errc::invalid_argument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      out = errc::not_found;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      out = errc::capacity_exhausted;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      out = errc::unavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      out = errc::timeout;
      break;
    default:
      out = kind == call_kind::load ? errc::load_failed : errc::internal;
      break;
  }
  std::string message =
      model_id + ": " + std::string(what) + " " + std::string(status_code_name(code));
  auto text = bounded_text(runtime_message);
  if (!text.empty()) message += ": " + text;
  return make_error(out, std::move(message));
}

}  // namespace warm::mmesh
