#include "storage/runtime_manifest.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "storage/located_file.hpp"

namespace warm {
namespace fs = std::filesystem;

namespace {

expected<runtime_manifest> bad(const std::string& display, const std::string& why) {
  return make_error(errc::invalid_argument, display + ": " + why);
}

// Whether `path` is `root` or beneath it (both canonical).
bool beneath(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p)
    if (p == path.end() || *r != *p) return false;
  return true;
}

}  // namespace

bool is_manifest(const std::string& path) {
  return fs::path(path).filename() == manifest_file_name;
}

expected<runtime_manifest> parse_runtime_manifest(std::string_view text,
                                                  const std::string& display) {
  if (text.size() > manifest_max_bytes)
    return bad(display, "is larger than " + std::to_string(manifest_max_bytes) + " bytes");
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad(display, "is not valid JSON");
  if (!doc.is_object()) return bad(display, "must be a JSON object");
  runtime_manifest m;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const auto& field = it.key();
    const auto& value = it.value();
    if (field == "type") {
      if (!value.is_string()) return bad(display, "\"type\" must be a string");
      m.type = value.get<std::string>();
    } else if (field == "path") {
      if (!value.is_string()) return bad(display, "\"path\" must be a string");
      m.path = value.get<std::string>();
    } else if (field == "key") {
      m.key = value.is_string() ? value.get<std::string>() : value.dump();
      if (m.key.size() > manifest_max_key)
        return bad(display,
                   "\"key\" is longer than " + std::to_string(manifest_max_key) + " bytes");
    } else {
      return bad(display, "unknown field \"" + field.substr(0, 64) +
                              "\" (a manifest has \"type\", \"path\" and \"key\")");
    }
  }
  static const std::regex type_rule("[a-z0-9_.-]{1,64}");
  if (m.type.empty()) return bad(display, "has no \"type\" (the model's type, e.g. \"sklearn\")");
  if (!std::regex_match(m.type, type_rule))
    return bad(display, "\"type\" must be 1..64 of a-z, 0-9, '_', '.' and '-'");
  for (const auto& k : model_file_kinds)
    if (m.type == k.kind)
      return bad(display, "\"type\" \"" + m.type +
                              "\" is a kind warm serves itself: put the model file in the version "
                              "directory instead of a manifest");
  if (m.path.empty()) m.path = ".";
  if (m.path.size() > 1024) return bad(display, "\"path\" is longer than 1024 bytes");
  if (m.path.find('\0') != std::string::npos) return bad(display, "\"path\" holds a NUL byte");
  fs::path rel(m.path);
  if (rel.is_absolute()) return bad(display, "\"path\" must be relative to its directory");
  for (const auto& part : rel)
    if (part == "..") return bad(display, "\"path\" may not hold \"..\"");
  return m;
}

expected<runtime_manifest> read_runtime_manifest(const model_location& where) {
  auto file = open_located(where);
  if (!file) return std::move(file).error();
  if (file->size() > manifest_max_bytes)
    return bad(where.path, "is larger than " + std::to_string(manifest_max_bytes) + " bytes");
  std::string text(file->size(), '\0');
  if (auto read = file->read_exactly(text.data(), text.size(), 0); !read)
    return std::move(read).error();
  return parse_runtime_manifest(text, where.path);
}

expected<std::string> manifest_target(const model_location& where,
                                      const runtime_manifest& manifest) {
  std::error_code ec;
  auto target = fs::canonical(fs::path(where.path).parent_path() / manifest.path, ec);
  if (ec)
    return make_error(errc::not_found,
                      where.path + ": its \"path\" " + manifest.path + ": " + ec.message());
  if (!where.root.empty() && !beneath(fs::path(where.root), target))
    return make_error(errc::invalid_argument, where.path + ": its \"path\" " + manifest.path +
                                                  " leads outside the repository root " +
                                                  where.root);
  return target.string();
}

expected<std::uint64_t> manifest_target_bytes(const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0)
    return make_error(errc::not_found, target + ": cannot be looked at");
  if (S_ISREG(st.st_mode)) return static_cast<std::uint64_t>(st.st_size);
  if (!S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument, target + ": is neither a file nor a directory");
  constexpr std::size_t most_entries = 100'000;
  std::uint64_t total = 0;
  std::size_t entries = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(target, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (++entries > most_entries)
      return make_error(errc::invalid_argument,
                        target + ": holds more than " + std::to_string(most_entries) + " entries");
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  }
  if (ec) return make_error(errc::load_failed, target + ": " + ec.message());
  return total;
}

}  // namespace warm
