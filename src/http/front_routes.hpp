// The HTTP front's route helpers (internal to src/http): answers, the bodies the repository
// routes take, the methods each path allows and how the connection gate classifies a request.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/conn_gate.hpp"
#include "warm/error.hpp"

namespace warm::http::front_detail {

// The binary tensor data extension: the JSON's length in a body that binary tensor data follows.
inline constexpr const char* json_length_header = "Inference-Header-Content-Length";

// The repository routes' bodies (index, load, unload) carry a flag or parameters, never data: a
// larger one is 413 whatever --max-request-bytes allows, which bounds the index's parsed document.
inline constexpr std::uint64_t max_control_body_bytes = 64 * 1024;

// Makes `body` the answer's content, of `content_type`, as httplib's set_content does (the body,
// and one Content-Type header) but moved in: httplib 0.11 copies it, a few KiB per inference.
void set_body(httplib::Response& res, std::string body, const char* content_type);
// Answers `status` with a JSON `body`.
void reply_json(httplib::Response& res, int status, std::string body);
// Answers an error: its status (http_status) and {"error": message}.
void reply_error(httplib::Response& res, const warm::error& e);

// The body limit of the repository routes: max_control_body_bytes, or a lower --max-request-bytes.
std::uint64_t control_body_limit(std::uint64_t max_request_bytes);

// What the gate needs to know of a route: the body limit, and whether a bodiless request is a
// health check or a metrics scrape (served on threads of their own).
request_class classify(std::uint64_t max_request_bytes, std::string_view method,
                       std::string_view target);

// The methods a path's route takes, for a 405's Allow header: "GET, HEAD" (httplib answers HEAD
// with a GET route), "POST", or empty for a path no route has. Every route routes() registers, its
// pattern's `*` a non-empty path segment (the routes' ([^/]+)); keep the two lists together.
std::string allowed_methods(std::string_view path);

// A repository load or unload takes no body or a JSON object (KServe's `{"parameters": …}`,
// whose parameters warm does not use). Checked without building a document.
expected<void> check_control_body(const std::string& body);

// A POST handler that receives the body itself. httplib would otherwise parse bodies sent as
// application/x-www-form-urlencoded (curl -d's default) as forms and refuse those over 8 KiB.
// The body is read into one buffer sized from Content-Length (httplib has refused it over
// max_bytes), so a large body is not copied while it grows. A body without a length (chunked) is
// counted as it arrives: past max_bytes reading stops, the answer is 413 and the connection is
// closed with the rest unread, so nothing past the limit is buffered.
template <class F>
httplib::Server::HandlerWithContentReader with_body(std::uint64_t max_bytes, F handle) {
  return [handle, max_bytes](const httplib::Request& req, httplib::Response& res,
                             const httplib::ContentReader& read) {
    std::string body;
    auto declared = req.get_header_value("Content-Length");
    if (!declared.empty() && declared.size() <= 19 &&
        declared.find_first_not_of("0123456789") == std::string::npos)
      body.reserve(
          static_cast<std::size_t>(std::min<std::uint64_t>(std::stoull(declared), max_bytes)));
    bool complete = read([&](const char* data, std::size_t n) {
      if (max_bytes && n > max_bytes - body.size()) {
        note_request_over_limit();
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (!complete) {  // over the size limit or cut short; the error handler answers
      if (current_request_timed_out()) res.status = 408;
      if (current_request_over_limit()) res.status = 413;
      if (res.status < 400) res.status = 400;
      return;
    }
    handle(req, body, res);
  };
}

}  // namespace warm::http::front_detail
