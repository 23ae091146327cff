// Conversions between warm's value types (warm/runtime_types.hpp, warm/error.hpp) and the types
// generated from schemas/warm.capnp. Plain functions, no I/O, no threads: the server and warmctl
// both use them, so the wire format has one definition.
//
// Naming: `to_capnp(value)` returns a capnp enum; `to_capnp(value, builder)` fills a builder the
// caller owns (it must be freshly initialised: lists are initialised here). `from_capnp(reader)`
// returns the warm value; the ones that can meet a client's malformed input (tensors, inference
// requests and results) return expected<T> with invalid_argument and never throw for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm.capnp.h"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"
#include "warm/versions.hpp"

namespace warm::rpc {

// ---- text ----------------------------------------------------------------------------------

// A capnp Text (or any kj::StringPtr) as a std::string; embedded NULs are kept.
inline std::string to_std(kj::StringPtr text) {
  return std::string(text.begin(), text.size());
}
// A std::string as capnp Text (borrowed: valid while `text` lives).
inline capnp::Text::Reader to_text(const std::string& text) {
  return capnp::Text::Reader(text.data(), text.size());
}
// Sets a list of Text made by `init(size)` (a builder's initX) to `in`.
template <typename Init>
void set_texts(const std::vector<std::string>& in, Init init) {
  auto list = init(static_cast<unsigned>(in.size()));
  for (unsigned i = 0; i < in.size(); ++i)
    list.set(i, to_text(in[i]));
}
// A list of Text as strings.
inline std::vector<std::string> texts(capnp::List<capnp::Text>::Reader in) {
  std::vector<std::string> out;
  out.reserve(in.size());
  for (auto t : in)
    out.push_back(to_std(t));
  return out;
}

// ---- status --------------------------------------------------------------------------------

// errc -> Status::Code (total: every errc has a code).
Status::Code to_capnp(errc code) noexcept;
// Status::Code -> errc. nullopt for OK. The two codes warm's embedding API never produces map to
// their nearest errc: UNAUTHENTICATED -> invalid_argument, TOO_LARGE -> invalid_argument (use
// code_name() to show the precise one).
std::optional<errc> to_errc(Status::Code code) noexcept;
// The code's lower-case name, matching warm::to_string(errc) for shared codes: "ok",
// "not_found", ..., "unauthenticated", "too_large".
std::string_view code_name(Status::Code code) noexcept;

// Fills `out` with OK (empty message).
void set_ok(Status::Builder out);
// Fills `out` with the error's code and message.
void to_capnp(const warm::error& err, Status::Builder out);
// Fills `out` with a code that has no errc (UNAUTHENTICATED, TOO_LARGE) or any other.
void set_status(Status::Builder out, Status::Code code, std::string_view message);
// OK -> a value; otherwise the error (code mapped by to_errc, message as sent).
expected<void> from_capnp(Status::Reader status);
// An optional error field (ModelStatus.lastError, ModelEvent.error, ...): nullopt when OK.
std::optional<warm::error> optional_error(Status::Reader status);
// The other way: OK for nullopt.
void to_capnp(const std::optional<warm::error>& err, Status::Builder out);

// ---- enums ---------------------------------------------------------------------------------

ModelState to_capnp(model_state state) noexcept;
model_state from_capnp(ModelState state) noexcept;  // unknown values (a newer peer) -> not_found
VModelState to_capnp(vmodel_state state) noexcept;
vmodel_state from_capnp(VModelState state) noexcept;  // unknown values -> not_found

// ---- registrations and statuses ------------------------------------------------------------

// version/sizeHint 0 mean unset.
void to_capnp(const model_info& info, ModelInfo::Builder out);
model_info from_capnp(ModelInfo::Reader info);

// loadStddevMs = sqrt(variance) and back; lastError OK <-> no error.
void to_capnp(const model_status& status, ModelStatus::Builder out);
model_status from_capnp(ModelStatus::Reader status);

void to_capnp(const vmodel_status& status, VModelStatus::Builder out);
vmodel_status from_capnp(VModelStatus::Reader status);

// A served model: defaultVersion 0 means none; policies as their texts (parse_version_policy,
// parse_load_policy; an unreadable one reads back as the default); a version's state as its name.
void to_capnp(const served_model_status& status, ServedModel::Builder out);
served_model_status from_capnp(ServedModel::Reader status);

// ---- tensors and inference -----------------------------------------------------------------

// Bytes a tensor of this dtype and shape holds, or invalid_argument when the product overflows
// 64 bits.
expected<std::uint64_t> tensor_bytes(dtype type, const capnp::List<std::uint64_t>::Reader& shape);

void to_capnp(const tensor& t, Tensor::Builder out);
// invalid_argument for an unknown dtype or data whose size is not product(shape) x dtype size.
expected<tensor> from_capnp(Tensor::Reader t);

void to_capnp(const infer_request& request, InferRequest::Builder out);
// invalid_argument naming the input when any tensor is malformed.
expected<infer_request> from_capnp(InferRequest::Reader request);

void to_capnp(const infer_result& result, InferResult::Builder out);
expected<infer_result> from_capnp(InferResult::Reader result);

// ---- inspection and events -----------------------------------------------------------------

void to_capnp(const inspection& snapshot, Inspection::Builder out);
void to_capnp(const cluster_info& info, ClusterInfo::Builder out);
cluster_info from_capnp(ClusterInfo::Reader info);
inspection from_capnp(Inspection::Reader snapshot);

void to_capnp(const model_event& event, ModelEvent::Builder out);
model_event from_capnp(ModelEvent::Reader event);

}  // namespace warm::rpc
