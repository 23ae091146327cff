#include "served_config.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "toml_text.hpp"
#include "warm/model_repository.hpp"
#include "warm/units.hpp"

namespace warm::warmd {

namespace {

const std::set<std::string> model_keys{
    "name",      "base-path", "versions",        "load-policy",     "labels",     "force-labels",
    "size-hint", "max-batch", "max-queue-delay", "preferred-batch", "batch-queue"};

std::string line_of(const toml::node& node) {
  return " (line " + std::to_string(node.source().begin.line) + ")";
}

// One [[model]] table.
expected<served_model_config> parse_model(const toml::table& t, const std::string& name) {
  served_model_config m;
  auto bad = [&](const toml::node& node, const std::string& key, const std::string& what) {
    return make_error(errc::invalid_argument,
                      name + ": model key \"" + key + "\" " + what + line_of(node));
  };
  for (auto& [key, node] : t)
    if (!model_keys.count(std::string(key.str())))
      return bad(node, std::string(key.str()), "is not known (docs/versions.md lists the keys)");
  auto text = [&](const char* key) -> expected<std::optional<std::string>> {
    auto* node = t.get(key);
    if (!node) return std::optional<std::string>();
    if (!node->is_string()) return bad(*node, key, "must be a string");
    return std::optional<std::string>(node->as_string()->get());
  };
  auto count = [&](const char* key) -> expected<std::optional<std::uint64_t>> {
    auto* node = t.get(key);
    if (!node) return std::optional<std::uint64_t>();
    if (!node->is_integer() || node->as_integer()->get() < 0)
      return bad(*node, key, "must be a non-negative integer");
    return std::optional<std::uint64_t>(static_cast<std::uint64_t>(node->as_integer()->get()));
  };
  auto model_name = text("name");
  if (!model_name) return std::move(model_name).error();
  if (!*model_name)
    return make_error(errc::invalid_argument, name + ": a [[model]] has no name" + line_of(t));
  m.name = **model_name;
  auto base = text("base-path");
  if (!base) return std::move(base).error();
  if (*base) m.base_path = **base;
  auto versions = text("versions");
  if (!versions) return std::move(versions).error();
  if (*versions) {
    auto policy = parse_version_policy(**versions);
    if (!policy) return bad(*t.get("versions"), "versions", ": " + policy.error().message);
    m.versions = *policy;
  }
  auto loading = text("load-policy");
  if (!loading) return std::move(loading).error();
  if (*loading) {
    auto policy = parse_load_policy(**loading);
    if (!policy) return bad(*t.get("load-policy"), "load-policy", ": " + policy.error().message);
    m.loading = *policy;
  }
  if (auto* labels = t.get("labels")) {
    if (!labels->is_table()) return bad(*labels, "labels", "must be a table of label = version");
    for (auto& [label, version] : *labels->as_table()) {
      if (!version.is_integer() || version.as_integer()->get() <= 0)
        return bad(version, "labels." + std::string(label.str()),
                   "must be a positive version number");
      m.labels[std::string(label.str())] = static_cast<std::uint64_t>(version.as_integer()->get());
    }
  }
  if (auto* force = t.get("force-labels")) {
    if (!force->is_boolean()) return bad(*force, "force-labels", "must be true or false");
    m.force_labels = force->as_boolean()->get();
  }
  if (auto* hint = t.get("size-hint")) {
    if (hint->is_string()) {
      auto bytes = parse_bytes(hint->as_string()->get());
      if (!bytes) return bad(*hint, "size-hint", ": " + bytes.error().message);
      m.size_hint = *bytes;
    } else if (hint->is_integer() && hint->as_integer()->get() > 0) {
      m.size_hint = static_cast<std::uint64_t>(hint->as_integer()->get());
    } else {
      return bad(*hint, "size-hint", "must be a size (\"64MiB\") or a positive number of bytes");
    }
  }
  // Batching: any of its keys gives the model its own settings (the rest at their defaults).
  auto max_batch = count("max-batch");
  if (!max_batch) return std::move(max_batch).error();
  auto queue = count("batch-queue");
  if (!queue) return std::move(queue).error();
  auto delay = text("max-queue-delay");
  if (!delay) return std::move(delay).error();
  auto* preferred = t.get("preferred-batch");
  if (*max_batch || *queue || *delay || preferred) {
    batching_options b;
    if (*max_batch) b.max_batch = **max_batch;
    if (*queue) b.max_queue = **queue;
    if (*delay) {
      auto d = parse_duration(**delay);
      if (!d) return bad(*t.get("max-queue-delay"), "max-queue-delay", ": " + d.error().message);
      b.max_queue_delay = std::chrono::duration_cast<std::chrono::microseconds>(*d);
    }
    if (preferred) {
      if (!preferred->is_array())
        return bad(*preferred, "preferred-batch", "must be an array of batch sizes");
      for (auto& size : *preferred->as_array()) {
        if (!size.is_integer() || size.as_integer()->get() <= 0)
          return bad(size, "preferred-batch", "must hold positive integers");
        b.preferred_batch.push_back(static_cast<std::uint64_t>(size.as_integer()->get()));
      }
    }
    m.batching = b;
  }
  return m;
}

}  // namespace

expected<served_models_config> parse_served_models(std::string_view text, const std::string& name) {
  auto parsed = parse_toml(text, name);
  if (!parsed) return std::move(parsed).error();
  served_models_config config;
  for (auto& [key, node] : *parsed) {
    if (key.str() != "model")
      return make_error(errc::invalid_argument, name + ": key \"" + std::string(key.str()) +
                                                    "\" is not known; models are [[model]] tables" +
                                                    line_of(node));
    if (!node.is_array_of_tables())
      return make_error(errc::invalid_argument,
                        name + ": \"model\" must be [[model]] tables" + line_of(node));
    for (auto& entry : *node.as_array()) {
      auto m = parse_model(*entry.as_table(), name);
      if (!m) return std::move(m).error();
      config.models.push_back(std::move(*m));
    }
  }
  if (auto ok = check_served_models(config); !ok)
    return make_error(errc::invalid_argument, name + ": " + ok.error().message);
  return config;
}

namespace {

// Whether a repository root is a URL (s3://, http://, https://; the scheme in any case), as
// sources::is_remote says.
bool remote_root(const std::string& root) {
  auto lower = root.substr(0, 8);
  for (auto& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.rfind("s3://", 0) == 0 || lower.rfind("http://", 0) == 0 ||
         lower.rfind("https://", 0) == 0;
}

}  // namespace

expected<std::vector<std::string>> repository_models(const std::vector<std::string>& roots,
                                                     const remote_models_fn& remote) {
  namespace fs = std::filesystem;
  std::set<std::string> names;
  for (auto& root : roots) {
    if (remote_root(root)) {
      if (!remote)
        return invalid_input("repository '" + root + "': remote roots cannot be listed here");
      auto listed = remote(root);
      if (!listed) return std::move(listed).error();
      for (auto& name : *listed) {
        served_model_config m;
        m.name = name;
        if (check_served_models({{m}})) names.insert(name);
      }
      continue;
    }
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      auto name = it->path().filename().string();
      if (!it->is_directory(ec) || names.count(name)) continue;
      served_model_config m;
      m.name = name;
      if (!check_served_models({{m}})) continue;
      auto versions = list_versions(it->path().string());
      if (versions && !versions->empty()) names.insert(name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

expected<served_models_config> served_models_for(const std::string& file, bool serve_repo,
                                                 const std::vector<std::string>& roots,
                                                 const remote_models_fn& remote) {
  served_models_config config;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return make_error(errc::not_found, file + ": cannot read the served-models file");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = parse_served_models(text, file);
    if (!parsed) return std::move(parsed).error();
    config = std::move(*parsed);
  }
  if (serve_repo) {
    std::set<std::string> named;
    for (auto& m : config.models)
      named.insert(m.name);
    auto models = repository_models(roots, remote);
    if (!models) return std::move(models).error();
    for (auto& name : *models) {
      if (named.count(name)) continue;
      served_model_config m;
      m.name = name;
      config.models.push_back(std::move(m));
    }
  }
  return config;
}

}  // namespace warm::warmd
