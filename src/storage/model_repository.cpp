#include "warm/model_repository.hpp"

#include "storage/runtime_manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "storage/confined_open.hpp"
#include "storage/located_file.hpp"

namespace warm {

std::optional<std::uint64_t> parse_version(const std::string& name) {
  if (name.empty() || name.size() > 18 || name[0] == '0') return std::nullopt;
  if (name.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(name);
}

namespace {

namespace fs = std::filesystem;

// True when `path` is `root` or below it; both must be canonical.
bool is_within(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p)
    if (p == path.end() || *r != *p) return false;
  return true;
}

// A model path as given: relative to a root, not empty, no NUL byte (invalid_argument otherwise).
expected<fs::path> relative_path(const std::string& relative) {
  if (relative.empty()) return make_error(errc::invalid_argument, "empty model path");
  if (relative.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "model paths may not contain NUL bytes");
  fs::path rel(relative);
  if (rel.is_absolute())
    return make_error(errc::invalid_argument,
                      relative + ": model paths must be relative to a repository root");
  return rel;
}

// The model file directly in `dir`: the one of model_file_kinds, or a warm.json manifest, present
// (as a regular file or not), empty when there is none; invalid_argument when there are several.
expected<fs::path> model_file_in(const fs::path& dir) {
  std::error_code ec;
  fs::path found;
  std::vector<const char*> names;
  for (const auto& k : model_file_kinds)
    names.push_back(k.file);
  names.push_back(manifest_file_name);
  for (const char* name : names) {
    auto candidate = dir / name;
    if (!fs::exists(fs::symlink_status(candidate, ec))) continue;
    if (!found.empty())
      return make_error(errc::invalid_argument, dir.string() + ": holds both " +
                                                    found.filename().string() + " and " + name +
                                                    "; a version directory holds one model file");
    found = candidate;
  }
  return found;
}

}  // namespace

std::string kind_of_file(const std::string& path) {
  auto ends = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (is_manifest(path)) return manifest_kind;
  return ends(".pt") ? "torchscript" : "dense";
}

expected<std::vector<std::uint64_t>> list_versions(const std::string& model_dir) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    return make_error(errc::not_found, model_dir + ": no such model directory");
  std::vector<std::uint64_t> versions;
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto v = parse_version(it->path().filename().string());
    if (!v) continue;
    auto file = model_file_in(it->path());
    if (file && !file->empty() && fs::is_regular_file(*file, ec)) versions.push_back(*v);
  }
  if (ec) return make_error(errc::load_failed, model_dir + ": cannot list: " + ec.message());
  std::sort(versions.begin(), versions.end());
  return versions;
}

expected<std::string> find_model_file(const std::string& path,
                                      std::optional<std::uint64_t> version) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (!fs::exists(status)) return make_error(errc::not_found, path + ": no such file or directory");
  if (!fs::is_directory(status)) {
    if (version)
      return make_error(errc::invalid_argument,
                        path + ": a version was given but the path is a file");
    return path;
  }
  fs::path dir(path);
  // A model.safetensors that is there but not a regular file (a FIFO, a directory) is named as
  // such, not passed over: opening a FIFO to read would block, and "no model here" would mislead.
  auto not_regular = [&](const fs::path& file) {
    auto st = fs::status(file, ec);
    return fs::exists(st) && !fs::is_regular_file(st);
  };
  auto refuse = [](const fs::path& file) {
    return make_error(errc::invalid_argument, file.string() + ": not a regular file");
  };
  if (!version) {
    auto here = model_file_in(dir);
    if (!here) return std::move(here).error();
    if (!here->empty())
      return not_regular(*here) ? refuse(*here) : expected<std::string>(here->string());
  }
  auto versions = list_versions(path);
  if (!versions) return std::move(versions).error();
  if (versions->empty()) {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!parse_version(it->path().filename().string())) continue;
      auto file = model_file_in(it->path());
      if (!file) return std::move(file).error();
      if (!file->empty() && not_regular(*file)) return refuse(*file);
    }
    return make_error(errc::not_found, path +
                                           ": holds neither a model file (model.safetensors, "
                                           "model.pt) nor numeric version directories");
  }
  std::uint64_t chosen = version ? *version : versions->back();
  if (!std::binary_search(versions->begin(), versions->end(), chosen)) {
    auto file = model_file_in(dir / std::to_string(chosen));
    if (!file) return std::move(file).error();
    return make_error(errc::not_found, path + ": has no version " + std::to_string(chosen));
  }
  auto file = model_file_in(dir / std::to_string(chosen));
  if (!file) return std::move(file).error();
  return file->string();
}

namespace {

// `path` relative to `root` (both canonical), or nullopt when it does not lie below it.
std::optional<std::string> relative_to(const std::string& root, const std::string& path) {
  auto prefix = root.back() == '/' ? root : root + '/';
  if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  return path.substr(prefix.size());
}

}  // namespace

expected<read_file> open_located(const model_location& where) {
  if (where.arriving) return read_file::arriving(where.arriving);
  if (where.root.empty()) return read_file::open(where.path);
  auto relative = relative_to(where.root, where.path);
  if (!relative)
    return make_error(errc::invalid_argument,
                      where.path + ": lies outside the repository root " + where.root);
  // The root is operator configuration, trusted up to its last component, which may not have
  // been swapped for a symlink since it was made canonical.
  int root_fd = ::open(where.root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR || err == ELOOP)
      return make_error(errc::not_found,
                        where.root + ": repository root is gone: " + std::strerror(err));
    return make_error(errc::load_failed,
                      where.root + ": cannot open the repository root: " + std::strerror(err));
  }
  auto file = open_beneath(root_fd, *relative, where.path);
  ::close(root_fd);
  return file;
}

file_seen look_at(const model_location& where) {
  auto file = open_located(where);
  if (!file) return {};
  auto identity = file->identity();
  if (!identity) return {};
  return {true, *identity};
}

expected<model_repository> model_repository::create(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const auto& root : roots) {
    std::error_code ec;
    auto c = fs::canonical(root, ec);
    if (ec || !fs::is_directory(c, ec))
      return make_error(errc::invalid_argument,
                        root + ": repository root is not an existing directory");
    canonical.push_back(c.string());
  }
  return model_repository(std::move(canonical));
}

expected<model_location> model_repository::resolve(const std::string& relative,
                                                   std::optional<std::uint64_t> version) const {
  auto rel = relative_path(relative);
  if (!rel) return std::move(rel).error();
  for (const auto& root_text : roots_) {
    fs::path root(root_text);
    std::error_code ec;
    auto candidate = fs::weakly_canonical(root / *rel, ec);
    if (ec) continue;
    if (!is_within(root, candidate))
      return make_error(errc::invalid_argument,
                        relative + ": resolves outside the repository root " + root_text);
    if (!fs::exists(candidate, ec)) continue;
    auto file = find_model_file(candidate.string(), version);
    if (!file) return std::move(file).error();
    // The file itself (or its version directory) may be a symlink leading elsewhere.
    auto real = fs::canonical(*file, ec);
    if (ec) return make_error(errc::not_found, *file + ": " + ec.message());
    if (!is_within(root, real))
      return make_error(errc::invalid_argument,
                        relative + ": resolves outside the repository root " + root_text);
    model_location found;
    found.path = real.string();
    found.root = root_text;
    found.kind = kind_of_file(*file);
    if (found.kind == manifest_kind) {  // the manifest names the model's type
      auto manifest = read_runtime_manifest(found);
      if (!manifest) return std::move(manifest).error();
      found.kind = manifest->type;
    }
    if (fs::path chosen(*file);
        chosen.parent_path().parent_path() == candidate)  // <candidate>/<N>/model file
      found.version = parse_version(chosen.parent_path().filename().string());
    return found;
  }
  return make_error(errc::not_found, relative + ": not found in any repository root");
}

namespace {

// A model directory: the root that holds it and its canonical path.
struct located_dir {
  fs::path root, dir;
};

expected<located_dir> locate_dir(const std::vector<std::string>& roots,
                                 const std::string& relative) {
  auto rel = relative_path(relative);
  if (!rel) return std::move(rel).error();
  for (const auto& root_text : roots) {
    fs::path root(root_text);
    std::error_code ec;
    auto dir = fs::weakly_canonical(root / *rel, ec);
    if (ec) continue;
    if (!is_within(root, dir))
      return make_error(errc::invalid_argument,
                        relative + ": resolves outside the repository root " + root_text);
    if (!fs::exists(dir, ec)) continue;
    if (!fs::is_directory(dir, ec))
      return make_error(errc::invalid_argument, relative + ": not a directory");
    return located_dir{root, dir};
  }
  return make_error(errc::not_found, relative + ": not found in any repository root");
}

}  // namespace

expected<std::string> model_repository::find_directory(const std::string& relative) const {
  auto found = locate_dir(roots_, relative);
  if (!found) return std::move(found).error();
  return found->dir.string();
}

expected<std::vector<version_file>> model_repository::look_at_versions(
    const std::string& relative) const {
  auto located = locate_dir(roots_, relative);
  if (!located) return std::move(located).error();
  const auto& [root, dir] = *located;
  std::vector<version_file> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto v = parse_version(it->path().filename().string());
    if (!v) continue;
    auto file = model_file_in(it->path());
    if (!file || file->empty()) continue;  // none yet, or two: not a version (yet)
    std::error_code fec;
    auto real = fs::canonical(*file, fec);
    if (fec || !is_within(root, real)) continue;  // a version leading outside is never served
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    version_file vf;
    vf.version = *v;
    vf.path = real.string();
    vf.size = static_cast<std::uint64_t>(st.st_size);
    vf.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    vf.inode = static_cast<std::uint64_t>(st.st_ino);
    found.push_back(std::move(vf));
  }
  if (ec) return make_error(errc::load_failed, relative + ": cannot list: " + ec.message());
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.version < b.version; });
  return found;
}

}  // namespace warm
