#include "warm/versions.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "core/model_id.hpp"

namespace warm {

namespace {

constexpr std::uint64_t max_latest = 1000;

expected<std::uint64_t> parse_positive(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0)
    return make_error(errc::invalid_argument,
                      std::string(what) + " '" + std::string(text) + "' is not a positive integer");
  return value;
}

expected<void> check_name(const std::string& id, const char* what) {
  if (auto ok = check_id(id, what); !ok) return ok;
  if (id.find('@') != std::string::npos)
    return make_error(errc::invalid_argument, std::string(what) + " '" + id + "' may not hold '@'");
  return {};
}

// Whether `p` starts with `scheme` ("s3://"), in any case.
bool has_scheme(const std::string& p, std::string_view scheme) {
  if (p.size() < scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(p[i])) != scheme[i]) return false;
  return true;
}

expected<void> check_base_path(const served_model_config& m) {
  const auto& p = m.base_path;
  if (p.empty()) return {};
  if (p.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "model '" + m.name + "': base path holds a NUL byte");
  if (has_scheme(p, "http://") || has_scheme(p, "https://"))
    return make_error(errc::invalid_argument,
                      "model '" + m.name + "': base path '" + p +
                          "' is an HTTP source, which cannot be listed for versions (use S3 or a "
                          "local repository)");
  // An S3 model directory: its bucket and key are checked like a relative path here, and parsed
  // as a URL when it is looked at.
  const bool s3 = has_scheme(p, "s3://");
  if (!s3 && p.front() == '/')
    return make_error(errc::invalid_argument, "model '" + m.name + "': base path '" + p +
                                                  "' must be relative to a repository root");
  std::string_view rest = p;
  if (s3) {
    rest.remove_prefix(5);
    if (rest.empty())
      return make_error(errc::invalid_argument,
                        "model '" + m.name + "': base path '" + p + "' names no bucket");
  }
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto part = rest.substr(0, slash);
    if (part == ".." || part == "." || part.empty())
      return make_error(errc::invalid_argument, "model '" + m.name + "': base path '" + p +
                                                    "' may not hold '.', '..' or an empty part");
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return {};
}

}  // namespace

expected<version_policy> parse_version_policy(std::string_view text) {
  version_policy policy;
  if (text == "all") {
    policy.which = version_policy::kind::all;
    return policy;
  }
  if (text == "latest") return policy;
  if (text.substr(0, 7) == "latest:") {
    auto n = parse_positive(text.substr(7), "latest's count");
    if (!n) return std::move(n).error();
    if (*n > max_latest)
      return make_error(errc::invalid_argument, "latest's count " + std::to_string(*n) +
                                                    " is over " + std::to_string(max_latest));
    policy.latest = *n;
    return policy;
  }
  if (text.substr(0, 9) == "specific:") {
    policy.which = version_policy::kind::specific;
    std::string_view rest = text.substr(9);
    std::set<std::uint64_t> versions;
    while (true) {
      auto comma = rest.find(',');
      auto v = parse_positive(rest.substr(0, comma), "version");
      if (!v) return std::move(v).error();
      versions.insert(*v);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    policy.specific.assign(versions.begin(), versions.end());
    return policy;
  }
  return make_error(errc::invalid_argument,
                    "version policy '" + std::string(text) +
                        "' is not latest, latest:N, all or specific:V[,V...]");
}

std::string to_string(const version_policy& policy) {
  switch (policy.which) {
    case version_policy::kind::all:
      return "all";
    case version_policy::kind::latest:
      return "latest:" + std::to_string(policy.latest);
    case version_policy::kind::specific:
      break;
  }
  std::string text = "specific:";
  for (std::size_t i = 0; i < policy.specific.size(); ++i)
    text += (i ? "," : "") + std::to_string(policy.specific[i]);
  return text;
}

std::vector<std::uint64_t> select_versions(const version_policy& policy,
                                           std::vector<std::uint64_t> present) {
  std::sort(present.begin(), present.end());
  switch (policy.which) {
    case version_policy::kind::all:
      return present;
    case version_policy::kind::latest:
      if (present.size() > policy.latest)
        present.erase(present.begin(), present.end() - static_cast<std::ptrdiff_t>(policy.latest));
      return present;
    case version_policy::kind::specific:
      break;
  }
  std::vector<std::uint64_t> chosen;
  std::set_intersection(present.begin(), present.end(), policy.specific.begin(),
                        policy.specific.end(), std::back_inserter(chosen));
  return chosen;
}

expected<load_policy> parse_load_policy(std::string_view text) {
  if (text == "availability-preserving") return load_policy::availability_preserving;
  if (text == "resource-preserving") return load_policy::resource_preserving;
  return make_error(errc::invalid_argument,
                    "load policy '" + std::string(text) +
                        "' is not availability-preserving or resource-preserving");
}

std::string_view to_string(load_policy policy) noexcept {
  return policy == load_policy::availability_preserving ? "availability-preserving"
                                                        : "resource-preserving";
}

std::string_view to_string(version_state state) noexcept {
  switch (state) {
    case version_state::new_:
      return "NEW";
    case version_state::loading:
      return "LOADING";
    case version_state::ready:
      return "READY";
    case version_state::unloading:
      return "UNLOADING";
    case version_state::error:
      return "ERROR";
  }
  return "?";
}

std::string version_id(const std::string& model, std::uint64_t version) {
  return model + "@" + std::to_string(version);
}

std::string label_id(const std::string& model, const std::string& label) {
  return model + "@" + label;
}

expected<void> check_served_models(const served_models_config& config) {
  std::set<std::string> names;
  for (auto& m : config.models) {
    if (auto ok = check_name(m.name, "served model"); !ok) return ok;
    if (!names.insert(m.name).second)
      return make_error(errc::invalid_argument, "served model '" + m.name + "' is listed twice");
    if (auto ok = check_base_path(m); !ok) return ok;
    if (m.versions.which == version_policy::kind::specific && m.versions.specific.empty())
      return make_error(errc::invalid_argument,
                        "model '" + m.name + "': specific versions name none");
    if (m.versions.which == version_policy::kind::latest &&
        (m.versions.latest == 0 || m.versions.latest > max_latest))
      return make_error(
          errc::invalid_argument,
          "model '" + m.name + "': latest's count must be 1.." + std::to_string(max_latest));
    for (auto& [label, version] : m.labels) {
      if (auto ok = check_name(label, "label"); !ok)
        return make_error(errc::invalid_argument, "model '" + m.name + "': " + ok.error().message);
      if (label.find_first_not_of("0123456789") == std::string::npos)
        return make_error(errc::invalid_argument,
                          "model '" + m.name + "': label '" + label +
                              "' is a number; versions are named by numbers");
      if (version == 0)
        return make_error(errc::invalid_argument,
                          "model '" + m.name + "': label '" + label + "' names version 0");
      if (auto ok = check_id(label_id(m.name, label), "label"); !ok) return ok;
    }
    if (auto ok = check_id(version_id(m.name, 999'999'999'999'999'999ULL), "model"); !ok)
      return make_error(errc::invalid_argument,
                        "served model name '" + m.name + "' is too long for its versions' ids");
  }
  return {};
}

}  // namespace warm
