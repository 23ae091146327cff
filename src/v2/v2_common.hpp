// What the KServe V2 fronts (src/http, src/grpc) share about the protocol's answers: Triton's
// model state names, which model state a name reports, the version check, and waiting for the
// runtime on a front's own thread within a time limit.
#pragma once

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}

namespace warm::v2 {

// Waits for a runtime future on the calling (front) thread; timeout when `limit` passes first
// ("no answer within 20 ms", "… within 5 s").
template <class T>
expected<T> wait(std::future<expected<T>> f, std::chrono::milliseconds limit) {
  if (f.wait_for(limit) != std::future_status::ready)
    return make_error(
        errc::timeout,
        "no answer within " + (limit.count() % 1000 ? std::to_string(limit.count()) + " ms"
                                                    : std::to_string(limit.count() / 1000) + " s"));
  return f.get();
}

// Triton's name for a model state in a repository index: READY, LOADING or UNAVAILABLE. Inline:
// src/http's V2 codec library uses it without linking this layer's runtime calls.
inline const char* triton_state(model_state state) noexcept {
  switch (state) {
    case model_state::loaded:
      return "READY";
    case model_state::queued:
    case model_state::loading:
      return "LOADING";
    default:
      return "UNAVAILABLE";
  }
}

// The state a model id reports, or a vmodel id's active model's; not_found for neither.
expected<model_state> state_of(runtime& rt, const std::string& id, std::chrono::milliseconds limit);

// The repository extension's load: forgets the model's load failures first (an explicit load is
// an operator's retry, as after fixing a model's file), then waits for it to be loaded; all
// within `limit`.
expected<void> load(runtime& rt, const std::string& id, std::chrono::milliseconds limit);

// The versions `name` serves, ascending: for a served model's name (docs/versions.md), its
// versions that are READY or LOADING (those a request may name); else, or when it has none, the
// version `meta` (name's description) says; none for a model file named directly. Asks the
// runtime's served models only for a name without '@'. All within `limit`.
expected<std::vector<std::uint64_t>> served_versions(runtime& rt, const std::string& name,
                                                     const model_metadata& meta,
                                                     std::chrono::milliseconds limit);

// What V2 model metadata says of `name`: the description of `target` (the model or vmodel a
// request for `name`, perhaps with a version, resolves to) and `name`'s served_versions.
struct described_model {
  model_metadata meta;
  std::vector<std::uint64_t> versions;
};
expected<described_model> describe(runtime& rt, const std::string& name, const std::string& target,
                                   std::chrono::milliseconds limit);

// The model a versioned request names: a served model's version or label `model@version`
// (docs/versions.md) when there is one, else `model` when the version it serves is `version`,
// parsed as a version directory name ("01" is not 1); not_found naming every version `model`
// serves (served_versions) otherwise. All within `limit`.
expected<std::string> version_target(runtime& rt, const std::string& model,
                                     const std::string& version, std::chrono::milliseconds limit);

// The version an inference's answer names (V2's model_version), from the model that served it
// and the version the request asked for (empty: none): N when the model is a served model's
// version `name@N`; else the version asked for when it is a version number (version_target
// accepted it, so it is the one the model serves); else empty (a model named without a version).
std::string answered_version(const std::string& served_model, const std::string& asked);

// Keeps the outputs a request asked for by name, in its order; all when it asked for none.
// invalid_argument naming an output the model does not have.
expected<void> select_outputs(infer_result& result, const std::vector<std::string>& names);

}  // namespace warm::v2
