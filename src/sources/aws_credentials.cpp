#include "sources/aws_credentials.hpp"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace warm::sources {
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// The sections of an INI file: name → key → value. invalid_argument, naming the line, for a line
// that is neither a section, a comment nor key = value.
expected<std::map<std::string, std::map<std::string, std::string>>> parse_ini(
    const std::string& text, const std::string& path) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line, section;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[') {
      if (t.back() != ']' || t.size() < 3)
        return invalid_input(path + ": line " + std::to_string(number) + " is not a [section]");
      section = trim(t.substr(1, t.size() - 2));
      if (section.rfind("profile ", 0) == 0) section = trim(section.substr(8));  // config style
      out[section];
      continue;
    }
    const auto eq = t.find('=');
    if (eq == std::string::npos || section.empty())
      return invalid_input(path + ": line " + std::to_string(number) +
                           " is neither a [section] nor key = value in one");
    out[section][trim(t.substr(0, eq))] = trim(t.substr(eq + 1));  // values never in messages
  }
  return out;
}

}  // namespace

expected<std::optional<aws_credentials>> find_credentials(const env_lookup& env,
                                                          const file_reader& read) {
  auto id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (id && secret && !id->empty() && !secret->empty()) {
    aws_credentials c{*id, *secret, env("AWS_SESSION_TOKEN").value_or(""), "environment"};
    return std::optional<aws_credentials>(std::move(c));
  }
  std::string path;
  if (auto f = env("AWS_SHARED_CREDENTIALS_FILE"); f && !f->empty()) {
    path = *f;
  } else if (auto home = env("HOME"); home && !home->empty()) {
    path = *home + "/.aws/credentials";
  } else {
    return std::optional<aws_credentials>();
  }
  auto text = read(path);
  if (!text) {
    if (text.error().code == errc::not_found) return std::optional<aws_credentials>();
    return invalid_input("cannot read the AWS credentials file " + path + ": " +
                         text.error().message);
  }
  auto ini = parse_ini(*text, path);
  if (!ini) return std::move(ini).error();
  auto profile = env("AWS_PROFILE").value_or("");
  if (profile.empty()) profile = "default";
  auto section = ini->find(profile);
  if (section == ini->end()) return std::optional<aws_credentials>();
  auto& keys = section->second;
  const bool has_id = keys.count("aws_access_key_id") && !keys["aws_access_key_id"].empty();
  const bool has_secret =
      keys.count("aws_secret_access_key") && !keys["aws_secret_access_key"].empty();
  if (!has_id && !has_secret) return std::optional<aws_credentials>();
  if (has_id != has_secret)
    return invalid_input(path + " [" + profile + "] has " +
                         (has_id ? "aws_access_key_id without aws_secret_access_key"
                                 : "aws_secret_access_key without aws_access_key_id"));
  aws_credentials c{keys["aws_access_key_id"], keys["aws_secret_access_key"],
                    keys.count("aws_session_token") ? keys["aws_session_token"] : "",
                    path + " [" + profile + "]"};
  return std::optional<aws_credentials>(std::move(c));
}

std::string find_region(const std::string& configured, const env_lookup& env) {
  if (!configured.empty()) return configured;
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (auto v = env(name); v && !v->empty()) return *v;
  return "us-east-1";
}

env_lookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

file_reader local_files() {
  return [](const std::string& path) -> expected<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(errc::not_found, path + " does not exist or cannot be opened");
    std::ostringstream s;
    s << in.rdbuf();
    if (s.str().size() > (1 << 20)) return invalid_input(path + " is larger than 1 MiB");
    return s.str();
  };
}

}  // namespace warm::sources
