#include "v2/v2_common.hpp"

#include <algorithm>

#include "warm/model_repository.hpp"
#include "warm/runtime.hpp"
#include "warm/versions.hpp"

namespace warm::v2 {

expected<model_state> state_of(runtime& rt, const std::string& id,
                               std::chrono::milliseconds limit) {
  auto st = wait(rt.status(id), limit);
  if (!st) return st.error();
  if (st->state != model_state::not_found) return st->state;
  auto v = wait(rt.vmodel_status(id), limit);
  if (!v)
    return v.error().code == errc::not_found
               ? make_error(errc::not_found, "no model or vmodel '" + id + "'")
               : v.error();
  return v->active_state;
}

expected<void> load(runtime& rt, const std::string& id, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  if (auto forgotten = wait(rt.retry(id), limit); !forgotten) return forgotten;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return wait(rt.ensure_loaded(id, true), std::max(left, std::chrono::milliseconds(0)));
}

namespace {

// "version 2", "versions 1 and 2", "versions 1, 2 and 3"; "a model file without a version" for
// none.
std::string versions_text(const std::vector<std::uint64_t>& versions) {
  if (versions.empty()) return "a model file without a version";
  std::string text = versions.size() == 1 ? "version " : "versions ";
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (i) text += i + 1 == versions.size() ? " and " : ", ";
    text += std::to_string(versions[i]);
  }
  return text;
}

}  // namespace

expected<std::vector<std::uint64_t>> served_versions(runtime& rt, const std::string& name,
                                                     const model_metadata& meta,
                                                     std::chrono::milliseconds limit) {
  std::vector<std::uint64_t> versions;
  if (name.find('@') == std::string::npos) {  // a served model's name never holds one
    auto served = wait(rt.served(), limit);
    if (!served) return served.error();
    for (const auto& m : *served) {
      if (m.config.name != name) continue;
      for (const auto& v : m.versions)  // ascending
        if (v.state == version_state::ready || v.state == version_state::loading)
          versions.push_back(v.version);
    }
  }
  if (versions.empty() && meta.version) versions.push_back(*meta.version);
  return versions;
}

expected<described_model> describe(runtime& rt, const std::string& name, const std::string& target,
                                   std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto meta = wait(rt.describe(target), limit);
  if (!meta) return meta.error();
  auto left =
      std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 deadline - std::chrono::steady_clock::now()));
  auto versions = served_versions(rt, name, *meta, left);
  if (!versions) return versions.error();
  return described_model{std::move(*meta), std::move(*versions)};
}

expected<std::string> version_target(runtime& rt, const std::string& model,
                                     const std::string& version, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  if (model.find('@') == std::string::npos && !version.empty()) {
    auto id = model + "@" + version;
    auto served = wait(rt.describe(id), limit);
    if (served) return id;
    if (served.error().code != errc::not_found && served.error().code != errc::invalid_argument)
      return served.error();
  }
  auto meta = wait(rt.describe(model), left());
  if (!meta) return meta.error();
  if (meta->version && parse_version(version) == meta->version) return model;
  auto served = served_versions(rt, model, *meta, left());
  if (!served) return served.error();
  return make_error(errc::not_found, "model '" + model + "' has no version " + version +
                                         "; it serves " + versions_text(*served));
}

std::string answered_version(const std::string& served_model, const std::string& asked) {
  auto at = served_model.rfind('@');
  if (at != std::string::npos)
    if (auto v = parse_version(served_model.substr(at + 1))) return std::to_string(*v);
  if (auto v = parse_version(asked)) return std::to_string(*v);
  return {};
}

expected<void> select_outputs(infer_result& result, const std::vector<std::string>& names) {
  if (names.empty()) return {};
  std::vector<tensor> chosen;
  for (const auto& name : names) {
    auto it = std::find_if(result.outputs.begin(), result.outputs.end(),
                           [&](const tensor& t) { return t.name == name; });
    if (it == result.outputs.end()) {
      std::string known;
      for (const auto& t : result.outputs)
        known += (known.empty() ? "'" : ", '") + t.name + "'";
      return make_error(errc::invalid_argument,
                        "unknown output '" + name + "'; the model's outputs are " + known);
    }
    chosen.push_back(std::move(*it));
    result.outputs.erase(it);
  }
  result.outputs = std::move(chosen);
  return {};
}

}  // namespace warm::v2
