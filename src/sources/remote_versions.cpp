#include "sources/remote_versions.hpp"

#include <map>
#include <set>

namespace warm::sources {
namespace {

// The prefix below which `dir`'s objects lie: its key with one trailing '/' (empty for a bucket).
std::string prefix_of(const object_url& dir) {
  auto prefix = dir.key;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  return prefix;
}

// Which model file `name` is: its index in model_file_kinds, or -1.
int model_file_index(const std::string& name) {
  for (std::size_t i = 0; i < std::size(model_file_kinds); ++i)
    if (name == model_file_kinds[i].file) return static_cast<int>(i);
  return -1;
}

expected<void> check_size(const object_url& dir, const std::vector<object_info>& listing) {
  if (listing.size() > max_listed_objects)
    return invalid_input("the listing of '" + dir.to_string() + "' holds " +
                         std::to_string(listing.size()) + " objects, more than the " +
                         std::to_string(max_listed_objects) + " warm looks at");
  return {};
}

// A version directory's candidates: which model files it holds (one object each).
struct candidate {
  std::map<int, const object_info*> files;
};

// The versions below `prefix` (relative keys "<v>/<model file>"), by model directory when
// `with_model` (keys "<model>/<v>/<model file>"; the model's name is then the map's first key).
std::map<std::string, std::map<std::uint64_t, candidate>> scan(
    const object_url& dir, const std::vector<object_info>& listing, bool with_model) {
  const auto prefix = prefix_of(dir);
  std::map<std::string, std::map<std::uint64_t, candidate>> out;
  for (const auto& o : listing) {
    const auto& key = o.url.key;
    if (o.url.kind != object_url::scheme::s3 || o.url.bucket != dir.bucket) continue;
    if (key.size() > max_listed_key_bytes || key.size() <= prefix.size()) continue;
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const auto rest = key.substr(prefix.size());
    std::string model;
    std::size_t start = 0;
    if (with_model) {
      const auto slash = rest.find('/');
      if (slash == std::string::npos || slash == 0) continue;
      model = rest.substr(0, slash);
      start = slash + 1;
    }
    const auto slash = rest.find('/', start);
    if (slash == std::string::npos) continue;
    const auto version = parse_version(rest.substr(start, slash - start));
    const auto file = model_file_index(rest.substr(slash + 1));  // a deeper key has a '/' in it
    if (!version || file < 0) continue;
    out[model][*version].files[file] = &o;  // a key listed twice is one file
  }
  return out;
}

}  // namespace

expected<std::vector<remote_version>> versions_in_listing(const object_url& dir,
                                                          const std::vector<object_info>& listing) {
  if (auto ok = check_size(dir, listing); !ok) return std::move(ok).error();
  std::vector<remote_version> out;
  auto found = scan(dir, listing, false);
  for (const auto& [v, c] : found[""])
    if (c.files.size() == 1) out.push_back({v, *c.files.begin()->second});  // two: not a version
  return out;
}

expected<std::vector<std::string>> models_in_listing(const object_url& root,
                                                     const std::vector<object_info>& listing) {
  if (auto ok = check_size(root, listing); !ok) return std::move(ok).error();
  std::vector<std::string> out;
  for (const auto& [model, versions] : scan(root, listing, true)) {
    if (model == "." || model == "..") continue;
    for (const auto& [v, c] : versions)
      if (c.files.size() == 1) {
        out.push_back(model);
        break;
      }
  }
  return out;
}

version_file as_version_file(const remote_version& v) {
  version_file f;
  f.version = v.version;
  f.path = v.object.url.to_string();
  f.size = v.object.size;
  f.mtime_ns = 0;
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : v.object.etag)
    hash = (hash ^ c) * 1099511628211ull;
  f.inode = hash;
  return f;
}

expected<std::vector<version_file>> look_at_remote_versions(object_store& store,
                                                            const object_url& dir) {
  auto listed_dir = dir;
  listed_dir.key = prefix_of(dir);
  auto listed = store.list(listed_dir);
  if (!listed) return std::move(listed).error();
  if (listed->empty())
    return make_error(errc::not_found, "nothing is stored below '" + dir.to_string() + "'");
  auto versions = versions_in_listing(dir, *listed);
  if (!versions) return std::move(versions).error();
  std::vector<version_file> out;
  for (const auto& v : *versions)
    out.push_back(as_version_file(v));
  return out;
}

expected<std::vector<version_file>> look_at_remote_versions(const remote_repository& repository,
                                                            const std::string& base) {
  auto cannot_list = [](const object_url& url) {
    return invalid_input("'" + url.to_string() +
                         "' is an HTTP source, which cannot be listed: serve versions from S3 or a "
                         "local repository, or register the version's file");
  };
  if (is_remote(base)) {
    auto url = parse_object_url(base);
    if (!url) return std::move(url).error();
    if (url->kind != object_url::scheme::s3) return cannot_list(*url);
    auto* store = repository.store_for(*url);
    if (!store) return invalid_input("no store is configured for '" + url->to_string() + "'");
    return look_at_remote_versions(*store, *url);
  }
  if (base.empty() || base[0] == '/' || base.find('\0') != std::string::npos)
    return invalid_input("model path '" + base + "' must be relative to a repository root");
  for (const auto& root : repository.roots()) {
    if (root.kind != object_url::scheme::s3) continue;
    auto dir = parse_object_url(root.child(base).to_string());  // refuses '.', '..', empty parts
    if (!dir) return std::move(dir).error();
    auto found = look_at_remote_versions(*repository.store_for(*dir), *dir);
    if (found || found.error().code != errc::not_found) return found;
  }
  return make_error(errc::not_found, "no S3 repository root holds '" + base + "'");
}

expected<std::vector<std::string>> remote_repository_models(object_store& store,
                                                            const object_url& root) {
  if (root.kind != object_url::scheme::s3)
    return invalid_input("repository '" + root.to_string() +
                         "' is an HTTP source, which cannot be listed: --serve-repo needs S3 or "
                         "local repositories");
  auto listed_root = root;
  listed_root.key = prefix_of(root);
  auto listed = store.list(listed_root);
  if (!listed) return std::move(listed).error();
  return models_in_listing(root, *listed);
}

}  // namespace warm::sources
