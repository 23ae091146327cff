#include "warm/model_repository.hpp"

#include <algorithm>
#include <filesystem>

namespace warm {
namespace {

namespace fs = std::filesystem;

// A positive decimal integer without sign or leading zeros, or nullopt.
std::optional<std::uint64_t> parse_version(const std::string& name) {
  if (name.empty() || name.size() > 18 || name[0] == '0') return std::nullopt;
  if (name.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(name);
}

// True when `path` is `root` or below it; both must be canonical.
bool is_within(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p)
    if (p == path.end() || *r != *p) return false;
  return true;
}

}  // namespace

expected<std::vector<std::uint64_t>> list_versions(const std::string& model_dir) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) return make_error(errc::not_found, model_dir + ": no such model directory");
  std::vector<std::uint64_t> versions;
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto v = parse_version(it->path().filename().string());
    if (v && fs::is_regular_file(it->path() / model_file_name, ec)) versions.push_back(*v);
  }
  if (ec) return make_error(errc::load_failed, model_dir + ": cannot list: " + ec.message());
  std::sort(versions.begin(), versions.end());
  return versions;
}

expected<std::string> find_model_file(const std::string& path, std::optional<std::uint64_t> version) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (!fs::exists(status)) return make_error(errc::not_found, path + ": no such file or directory");
  if (!fs::is_directory(status)) {
    if (version) return make_error(errc::invalid_argument, path + ": a version was given but the path is a file");
    return path;
  }
  fs::path dir(path);
  if (!version && fs::is_regular_file(dir / model_file_name, ec)) return (dir / model_file_name).string();
  auto versions = list_versions(path);
  if (!versions) return std::move(versions).error();
  if (versions->empty())
    return make_error(errc::not_found, path + ": holds neither model.safetensors nor numeric version directories");
  std::uint64_t chosen = version ? *version : versions->back();
  if (!std::binary_search(versions->begin(), versions->end(), chosen))
    return make_error(errc::not_found, path + ": has no version " + std::to_string(chosen));
  return (dir / std::to_string(chosen) / model_file_name).string();
}

expected<model_repository> model_repository::create(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const auto& root : roots) {
    std::error_code ec;
    auto c = fs::canonical(root, ec);
    if (ec || !fs::is_directory(c, ec))
      return make_error(errc::invalid_argument, root + ": repository root is not an existing directory");
    canonical.push_back(c.string());
  }
  return model_repository(std::move(canonical));
}

expected<std::string> model_repository::resolve(const std::string& relative, std::optional<std::uint64_t> version) const {
  fs::path rel(relative);
  if (relative.empty()) return make_error(errc::invalid_argument, "empty model path");
  if (rel.is_absolute()) return make_error(errc::invalid_argument, relative + ": model paths must be relative to a repository root");
  for (const auto& root_text : roots_) {
    fs::path root(root_text);
    std::error_code ec;
    auto candidate = fs::weakly_canonical(root / rel, ec);
    if (ec) continue;
    if (!is_within(root, candidate))
      return make_error(errc::invalid_argument, relative + ": resolves outside the repository root " + root_text);
    if (!fs::exists(candidate, ec)) continue;
    auto file = find_model_file(candidate.string(), version);
    if (!file) return std::move(file).error();
    // The file itself (or its version directory) may be a symlink leading elsewhere.
    auto real = fs::canonical(*file, ec);
    if (ec) return make_error(errc::not_found, *file + ": " + ec.message());
    if (!is_within(root, real))
      return make_error(errc::invalid_argument, relative + ": resolves outside the repository root " + root_text);
    return real.string();
  }
  return make_error(errc::not_found, relative + ": not found in any repository root");
}

}  // namespace warm
