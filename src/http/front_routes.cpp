#include "http/front_routes.hpp"

#include <nlohmann/json.hpp>

#include "http/console_routes.hpp"
#include "http/v2_codec.hpp"

namespace warm::http::front_detail {

using json = nlohmann::json;

void set_body(httplib::Response& res, std::string body, const char* content_type) {
  res.body = std::move(body);
  res.headers.erase("Content-Type");  // every one, whatever its case (httplib's headers map)
  res.set_header("Content-Type", content_type);
}

void reply_json(httplib::Response& res, int status, std::string body) {
  res.status = status;
  // With the charset named, httplib does not compress the answer for a client that accepts
  // gzip or brotli: compressing costs far more CPU than loopback or LAN bytes (brotli's default
  // level took a second for a 350 KB console page of models).
  set_body(res, std::move(body), "application/json; charset=utf-8");
}

void reply_error(httplib::Response& res, const warm::error& e) {
  reply_json(res, http_status(e.code), encode_error(e.message));
}

std::uint64_t control_body_limit(std::uint64_t max_request_bytes) {
  return max_request_bytes ? std::min(max_request_bytes, max_control_body_bytes)
                           : max_control_body_bytes;
}

request_class classify(std::uint64_t max_request_bytes, std::string_view method,
                       std::string_view target) {
  auto starts = [&](std::string_view prefix) { return target.substr(0, prefix.size()) == prefix; };
  request_class c;
  c.max_body = starts("/v2/repository/") ? control_body_limit(max_request_bytes)
               : starts("/console/actions/")
                   ? std::min(control_body_limit(max_request_bytes), max_action_body_bytes)
                   : max_request_bytes;
  c.light =
      method == "GET" && (starts("/v2/health/") || target == "/metrics" || starts("/metrics?"));
  return c;
}

std::string allowed_methods(std::string_view path) {
  static constexpr std::pair<const char*, const char*> routes[] = {
      {"/v2/health/live", "GET, HEAD"},
      {"/v2/health/ready", "GET, HEAD"},
      {"/v2", "GET, HEAD"},
      {"/v2/models/*", "GET, HEAD"},
      {"/v2/models/*/versions/*", "GET, HEAD"},
      {"/v2/models/*/ready", "GET, HEAD"},
      {"/v2/models/*/versions/*/ready", "GET, HEAD"},
      {"/v2/models/*/infer", "POST"},
      {"/v2/models/*/versions/*/infer", "POST"},
      {"/v2/repository/index", "POST"},
      {"/v2/repository/models/*/load", "POST"},
      {"/v2/repository/models/*/unload", "POST"},
      {"/metrics", "GET, HEAD"},
      {"/", "GET, HEAD"},
      {"/console", "GET, HEAD"},
      {"/console/index.html", "GET, HEAD"},
      {"/console/console.js", "GET, HEAD"},
      {"/console/console.css", "GET, HEAD"},
      {"/console/feed", "GET, HEAD"},
      {"/console/models", "GET, HEAD"},
      {"/console/actions/load", "POST"},
      {"/console/actions/unload", "POST"},
      {"/console/actions/retry", "POST"},
      {"/console/actions/move", "POST"},
  };
  auto matches = [&](std::string_view pattern) {
    std::string_view rest = path;
    while (!pattern.empty()) {
      auto p_end = std::min(pattern.find('/', 1), pattern.size());
      auto r_end = std::min(rest.find('/', 1), rest.size());
      auto want = pattern.substr(0, p_end), got = rest.substr(0, r_end);
      if (want == "/*" ? got.size() < 2 || got.front() != '/' : want != got) return false;
      pattern.remove_prefix(p_end);
      rest.remove_prefix(r_end);
    }
    return rest.empty();
  };
  for (const auto& [pattern, allow] : routes)
    if (matches(pattern)) return allow;
  return {};
}

expected<void> check_control_body(const std::string& body) {
  auto first = body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  if (body[first] != '{' || !json::accept(body))
    return make_error(errc::invalid_argument, "the request body must be empty or a JSON object");
  return {};
}

}  // namespace warm::http::front_detail
