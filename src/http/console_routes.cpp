#include "http/console_routes.hpp"

#include <nlohmann/json.hpp>

#include "console/assets.hpp"
#include "console/monitor.hpp"
#include "http/front_routes.hpp"
#include "http/v2_codec.hpp"
#include "v2/v2_common.hpp"
#include "warm/runtime.hpp"

namespace warm::http::front_detail {

using json = nlohmann::json;

namespace {

// Only warmd's own script, style and routes; no inline script, no framing, no forms elsewhere.
constexpr const char* content_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void secure_headers(httplib::Response& res) {
  res.set_header("Content-Security-Policy", content_policy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
}

console::query_params params_of(const httplib::Request& req) {
  return {req.params.begin(), req.params.end()};
}

void reply_state(httplib::Response& res, const expected<std::string>& body) {
  secure_headers(res);
  res.set_header("Cache-Control", "no-store");
  if (!body) return reply_error(res, body.error());
  reply_json(res, 200, *body);
}

// An action's body: a JSON object with exactly `fields`, each a non-empty string.
expected<std::vector<std::string>> action_fields(const std::string& body,
                                                 const std::vector<std::string>& fields) {
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return make_error(errc::invalid_argument, "the body must be a JSON object");
  std::vector<std::string> out;
  for (const auto& f : fields) {
    auto it = doc.find(f);
    if (it == doc.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
      return make_error(errc::invalid_argument,
                        "the body must name \"" + f + "\" (a non-empty string)");
    out.push_back(it->get<std::string>());
  }
  if (doc.size() != fields.size())
    for (auto& [key, value] : doc.items())
      if (std::find(fields.begin(), fields.end(), key) == fields.end())
        return make_error(errc::invalid_argument,
                          "unknown field \"" + key.substr(0, 64) + "\" in the body");
  return out;
}

// Runs `act` on the body's fields and answers `{}` (or the body `act` returns) or its error.
template <class F>
httplib::Server::HandlerWithContentReader action(std::vector<std::string> fields, F act) {
  return with_body(
      max_action_body_bytes,
      [fields, act](const httplib::Request&, const std::string& body, httplib::Response& res) {
        secure_headers(res);
        auto got = action_fields(body, fields);
        if (!got) return reply_error(res, got.error());
        expected<std::string> answer = act(*got);
        if (!answer) return reply_error(res, answer.error());
        reply_json(res, 200, *answer);
      });
}

}  // namespace

bool console_public(std::string_view path) {
  return console::find_asset(path) != nullptr;
}

void add_console_routes(httplib::Server& s, runtime& rt, console::monitor& monitor,
                        std::chrono::milliseconds timeout) {
  auto page = [](const httplib::Request& req, httplib::Response& res) {
    const auto* a = console::find_asset(req.path);
    if (!a) return reply_json(res, 404, encode_error("no route GET " + req.path));
    secure_headers(res);
    res.set_header("Cache-Control", "no-cache");
    res.status = 200;
    res.set_content(std::string(a->body), std::string(a->type));
  };
  for (const char* path : {"/", "/console", "/console/", "/console/index.html",
                           "/console/console.js", "/console/console.css"})
    s.Get(path, page);
  s.Get("/console/feed", [&monitor](const httplib::Request& req, httplib::Response& res) {
    auto q = console::parse_feed_query(params_of(req));
    if (!q) return reply_error(res, q.error());
    reply_state(res, monitor.feed(*q));
  });
  s.Get("/console/models", [&monitor](const httplib::Request& req, httplib::Response& res) {
    auto q = console::parse_models_query(params_of(req));
    if (!q) return reply_error(res, q.error());
    reply_state(res, monitor.models(*q));
  });
  s.Post(
      "/console/actions/load",
      action({"model"}, [&rt, timeout](const std::vector<std::string>& f) -> expected<std::string> {
        if (auto done = v2::load(rt, f[0], timeout); !done) return done.error();
        return std::string("{}");
      }));
  s.Post(
      "/console/actions/unload",
      action({"model"}, [&rt, timeout](const std::vector<std::string>& f) -> expected<std::string> {
        if (auto done = v2::wait(rt.unload(f[0]), timeout); !done) return done.error();
        return std::string("{}");
      }));
  s.Post(
      "/console/actions/retry",
      action({"model"}, [&rt, timeout](const std::vector<std::string>& f) -> expected<std::string> {
        if (auto done = v2::wait(rt.retry(f[0]), timeout); !done) return done.error();
        return std::string("{}");
      }));
  s.Post("/console/actions/move",
         action({"vmodel", "target"},
                [&rt, timeout](const std::vector<std::string>& f) -> expected<std::string> {
                  auto moved = v2::wait(rt.set_vmodel(f[0], f[1], false, std::nullopt), timeout);
                  if (!moved) return moved.error();
                  return json{{"vmodel", moved->id},
                              {"state", std::string(to_string(moved->state))},
                              {"active", moved->active},
                              {"target", moved->target}}
                      .dump(-1, ' ', false, json::error_handler_t::replace);
                }));
}

}  // namespace warm::http::front_detail
