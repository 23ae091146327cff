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
    return make_error(errc::timeout, "no answer within " + (limit.count() % 1000 ? std::to_string(limit.count()) + " ms"
                                                                                 : std::to_string(limit.count() / 1000) + " s"));
  return f.get();
}

// Triton's name for a model state in a repository index: READY, LOADING or UNAVAILABLE.
const char* triton_state(model_state state) noexcept;

// The state a model id reports, or a vmodel id's active model's; not_found for neither.
expected<model_state> state_of(runtime& rt, const std::string& id, std::chrono::milliseconds limit);

// The repository extension's load: forgets the model's load failures first (an explicit load is
// an operator's retry, as after fixing a model's file), then waits for it to be loaded; all
// within `limit`.
expected<void> load(runtime& rt, const std::string& id, std::chrono::milliseconds limit);

// Nothing when `version` is the version `meta` (model `model`'s) serves, parsed as a version
// directory name ("01" is not 1); not_found naming both otherwise.
expected<void> check_version(const std::string& model, const model_metadata& meta, const std::string& version);

// The model a versioned request names: a served model's version or label `model@version`
// (docs/versions.md) when there is one, else `model` when check_version accepts `version` for it;
// not_found otherwise. All within `limit`.
expected<std::string> version_target(runtime& rt, const std::string& model, const std::string& version,
                                     std::chrono::milliseconds limit);

// Keeps the outputs a request asked for by name, in its order; all when it asked for none.
// invalid_argument naming an output the model does not have.
expected<void> select_outputs(infer_result& result, const std::vector<std::string>& names);

}  // namespace warm::v2
