#include "sources/remote_repository.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "warm/model_repository.hpp"

namespace warm::sources {
namespace {

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The object's path inside its store: the key (S3) or the URL path without its leading '/'.
std::string inner_path(const object_url& url) {
  if (url.kind == object_url::scheme::s3) return url.key;
  return url.path.empty() ? std::string() : url.path.substr(url.path[0] == '/' ? 1 : 0);
}

bool is_model_file(const std::string& name) {
  for (const auto& k : model_file_kinds)
    if (name == k.file) return true;
  return false;
}

// A path relative to a root may not leave it.
expected<void> check_relative(const std::string& path) {
  if (path.empty()) return invalid_input("an empty model path");
  if (path[0] == '/') return invalid_input("model path '" + path + "' is absolute");
  for (const auto& s : segments(path))
    if (s == "." || s == "..")
      return invalid_input("model path '" + path + "' may not contain '.' or '..'");
  if (path.find('\0') != std::string::npos) return invalid_input("a model path with a NUL byte");
  return {};
}

}  // namespace

expected<remote_repository> remote_repository::create(const std::vector<std::string>& roots,
                                                      remote_stores stores) {
  std::vector<object_url> parsed;
  for (const auto& r : roots) {
    auto url = parse_object_url(r);
    if (!url) return std::move(url).error();
    parsed.push_back(std::move(*url));
  }
  remote_repository out(std::move(parsed), std::move(stores));
  for (const auto& url : out.roots_)
    if (!out.store_for(url))
      return invalid_input("no store is configured for repository '" + url.to_string() + "'");
  return out;
}

object_store* remote_repository::store_for(const object_url& url) const {
  return url.kind == object_url::scheme::s3 ? stores_.s3.get() : stores_.http.get();
}

expected<remote_model> remote_repository::resolve(const std::string& path,
                                                  std::optional<std::uint64_t> version) const {
  if (is_remote(path)) {
    auto url = parse_object_url(path);
    if (!url) return std::move(url).error();
    if (!store_for(*url))
      return invalid_input("no store is configured for '" + url->to_string() + "'");
    return resolve_url(*url, version);
  }
  if (auto ok = check_relative(path); !ok) return std::move(ok).error();
  for (const auto& root : roots_) {
    auto found = resolve_url(root.child(path), version);
    if (found || found.error().code != errc::not_found) return found;
  }
  return make_error(errc::not_found, "no remote repository holds '" + path + "'");
}

expected<remote_model> remote_repository::resolve_url(const object_url& url,
                                                      std::optional<std::uint64_t> version) const {
  auto* store = store_for(url);
  const auto parts = segments(inner_path(url));
  const std::string last = parts.empty() ? std::string() : parts.back();
  // A model file named directly.
  if (is_model_file(last)) {
    auto info = store->head(url);
    if (!info) return std::move(info).error();
    std::optional<std::uint64_t> in_version;
    if (parts.size() >= 2) in_version = parse_version(parts[parts.size() - 2]);
    if (version && in_version != version)
      return invalid_input("'" + url.to_string() + "' is not version " + std::to_string(*version));
    return remote_model{std::move(*info), last, in_version};
  }
  if (url.kind != object_url::scheme::s3) {
    // A web server cannot be listed: the model file is looked for by its names, in the version
    // directory asked for or in the URL itself as a version directory.
    const auto dir = version ? url.child(std::to_string(*version)) : url;
    for (const auto& k : model_file_kinds) {
      auto info = store->head(dir.child(k.file));
      if (info)
        return remote_model{std::move(*info), k.file, version ? version : parse_version(last)};
      if (info.error().code != errc::not_found) return std::move(info).error();
    }
    return make_error(errc::not_found,
                      "no model file at '" + dir.to_string() +
                          "' (an HTTP source cannot be listed: name the version or the file)");
  }
  // S3: list the directory. Keys "<file>" make it a version directory; "<v>/<file>" versions.
  auto dir = url;
  if (!dir.key.empty() && dir.key.back() != '/') dir.key += '/';
  auto listed = store->list(dir);
  if (!listed) return std::move(listed).error();
  const std::string& prefix = dir.key;
  std::map<std::uint64_t, std::vector<const object_info*>> versions;
  std::vector<const object_info*> direct;
  for (const auto& o : *listed) {
    const auto key = inner_path(o.url);
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const auto rel = segments(key.substr(prefix.size()));
    if (rel.size() == 1 && is_model_file(rel[0])) direct.push_back(&o);
    if (rel.size() == 2 && is_model_file(rel[1]))
      if (auto v = parse_version(rel[0])) versions[*v].push_back(&o);
  }
  auto one = [&](const std::vector<const object_info*>& files, const std::string& where,
                 std::optional<std::uint64_t> v) -> expected<remote_model> {
    if (files.size() > 1) return invalid_input("'" + where + "' holds more than one model file");
    const auto& o = *files.front();
    auto name = segments(inner_path(o.url)).back();
    return remote_model{o, std::move(name), v};
  };
  if (!direct.empty()) {
    auto v = parse_version(last);
    if (version && v != version)
      return invalid_input("'" + url.to_string() + "' is not version " + std::to_string(*version));
    return one(direct, url.to_string(), v);
  }
  if (versions.empty())
    return make_error(errc::not_found, "no model version under '" + url.to_string() + "'");
  if (version) {
    auto it = versions.find(*version);
    if (it == versions.end())
      return make_error(errc::not_found,
                        "'" + url.to_string() + "' has no version " + std::to_string(*version));
    return one(it->second, url.to_string() + "/" + std::to_string(*version), *version);
  }
  const auto& highest = *versions.rbegin();
  return one(highest.second, url.to_string() + "/" + std::to_string(highest.first), highest.first);
}

model_location copy_location(const remote_model& model, std::string path) {
  model_location where;
  where.path = std::move(path);
  where.version = model.version;
  where.kind = kind_of_file(model.name);
  where.source = model.object.url.to_string();
  where.source_etag = model.object.etag;
  where.source_bytes = model.object.size;
  return where;
}

expected<fetch_stats> fetch_to_file(const remote_repository& repository, remote_model& model,
                                    const std::string& path, std::uint64_t reserved,
                                    file_arrival* arrival) {
  auto* store = repository.store_for(model.object.url);
  if (!store) return invalid_input("no store for '" + model.object.url.to_string() + "'");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return make_error(errc::load_failed,
                      "cannot write the disk tier's file " + path + ": " + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  if (arrival) {
    const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (reader < 0)
      return make_error(errc::load_failed,
                        "cannot read the disk tier's file " + path + ": " + std::strerror(errno));
    arrival->give_file(reader);
  }
  auto sink = [fd, &path, arrival](std::uint64_t offset, const char* data,
                                   std::size_t bytes) -> expected<void> {
    while (bytes > 0) {
      const auto n = ::pwrite(fd, data, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return make_error(errc::load_failed, "cannot write the disk tier's file " + path + ": " +
                                                 std::strerror(n < 0 ? errno : ENOSPC));
      if (arrival) arrival->arrived(offset, static_cast<std::uint64_t>(n));
      data += n;
      offset += static_cast<std::uint64_t>(n);
      bytes -= static_cast<std::size_t>(n);
    }
    return {};
  };
  if (model.object.etag.empty()) {  // not looked at yet: the fetch checks against what this sees
    auto now = store->head(model.object.url);
    if (!now) return std::move(now).error();
    model.object = std::move(*now);
    if (model.object.size != reserved) {
      fetch_stats changed;
      changed.changed = true;
      return changed;
    }
  }
  constexpr int tries = 3;
  for (int attempt = 1;; ++attempt) {
    if (arrival && attempt > 1) arrival->restart();
    if (::ftruncate(fd, 0) != 0)
      return make_error(errc::load_failed, "cannot truncate the disk tier's file " + path + ": " +
                                               std::strerror(errno));
    auto fetched = store->fetch(model.object, sink, repository.fetch());
    if (!fetched || !fetched->changed) return fetched;
    auto now = store->head(model.object.url);
    if (!now) return std::move(now).error();
    model.object = std::move(*now);
    if (model.object.size != reserved) return fetched;  // changed size: reserve again
    if (attempt == tries)
      return make_error(errc::load_failed, "'" + model.object.url.to_string() +
                                               "' kept changing during the fetch (" +
                                               std::to_string(tries) + " tries)");
  }
}

}  // namespace warm::sources
