#include "v2/v2_common.hpp"

#include <algorithm>

#include "warm/model_repository.hpp"
#include "warm/runtime.hpp"

namespace warm::v2 {

const char* triton_state(model_state state) noexcept {
  switch (state) {
    case model_state::loaded: return "READY";
    case model_state::queued:
    case model_state::loading: return "LOADING";
    default: return "UNAVAILABLE";
  }
}

expected<model_state> state_of(runtime& rt, const std::string& id, std::chrono::milliseconds limit) {
  auto st = wait(rt.status(id), limit);
  if (!st) return st.error();
  if (st->state != model_state::not_found) return st->state;
  auto v = wait(rt.vmodel_status(id), limit);
  if (!v) return v.error().code == errc::not_found ? make_error(errc::not_found, "no model or vmodel '" + id + "'") : v.error();
  return v->active_state;
}

expected<void> load(runtime& rt, const std::string& id, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  if (auto forgotten = wait(rt.retry(id), limit); !forgotten) return forgotten;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return wait(rt.ensure_loaded(id, true), std::max(left, std::chrono::milliseconds(0)));
}

expected<void> check_version(const std::string& model, const model_metadata& meta, const std::string& version) {
  if (meta.version && parse_version(version) == meta.version) return {};
  return make_error(errc::not_found, "model '" + model + "' has no version " + version + "; it serves " +
                                         (meta.version ? "version " + std::to_string(*meta.version)
                                                       : std::string("a model file without a version")));
}

expected<std::string> version_target(runtime& rt, const std::string& model, const std::string& version,
                                     std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
  };
  if (model.find('@') == std::string::npos && !version.empty()) {
    auto id = model + "@" + version;
    auto served = wait(rt.describe(id), limit);
    if (served) return id;
    if (served.error().code != errc::not_found && served.error().code != errc::invalid_argument) return served.error();
  }
  auto meta = wait(rt.describe(model), left());
  if (!meta) return meta.error();
  if (auto ok = check_version(model, *meta, version); !ok) return ok.error();
  return model;
}

expected<void> select_outputs(infer_result& result, const std::vector<std::string>& names) {
  if (names.empty()) return {};
  std::vector<tensor> chosen;
  for (const auto& name : names) {
    auto it = std::find_if(result.outputs.begin(), result.outputs.end(), [&](const tensor& t) { return t.name == name; });
    if (it == result.outputs.end()) {
      std::string known;
      for (const auto& t : result.outputs) known += (known.empty() ? "'" : ", '") + t.name + "'";
      return make_error(errc::invalid_argument, "unknown output '" + name + "'; the model's outputs are " + known);
    }
    chosen.push_back(std::move(*it));
    result.outputs.erase(it);
  }
  result.outputs = std::move(chosen);
  return {};
}

}  // namespace warm::v2
