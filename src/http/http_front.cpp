#include "http/http_front.hpp"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "console/monitor.hpp"
#include "http/conn_gate.hpp"
#include "http/console_routes.hpp"
#include "http/decode_budget.hpp"
#include "http/front_routes.hpp"
#include "http/front_server.hpp"
#include "http/infer_wait.hpp"
#include "net/front_access.hpp"
#include "net/listen.hpp"
#include "net/login_limiter.hpp"
#include "net/tls_server.hpp"
#include "net/token.hpp"
#include "v2/v2_common.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime.hpp"

namespace warm::http {

using json = nlohmann::json;
using v2::wait;
using namespace front_detail;

struct front::impl {
  runtime& rt;
  front_options options;
  std::unique_ptr<socket_acceptor> listener;  // the front's listening socket and accept loop
  decode_budget decoding{std::max<std::uint64_t>(1, options.max_decoding_bytes)};
  gated_server server;
  std::unique_ptr<console::monitor> console;  // while the console is served
  int port = 0;
  bool stopped = false;
  mutable std::mutex tls_mutex;
  std::shared_ptr<const net::ssl_server> tls;  // under tls_mutex; new connections' TLS, null: plain

  impl(runtime& r, front_options o) : rt(r), options(std::move(o)) {}

  std::shared_ptr<const net::ssl_server> current_tls() const {
    std::lock_guard<std::mutex> lock(tls_mutex);
    return tls;
  }

  // False when the request does not carry the token, with `retry_after` set when the address's
  // failed logins are over the limit. The token is compared first: the right one is never
  // refused, whatever the address's budget (a shared NAT or a proxy speaks for many clients). A
  // wrong token presented counts as a failed login; none at all does not.
  bool authorized(const httplib::Request& req, std::chrono::seconds& retry_after) const {
    if (options.token.empty()) return true;
    const bool presented = req.has_header("Authorization");
    auto header = presented ? req.get_header_value("Authorization") : std::string();
    const std::string prefix = "Bearer ";
    // The prefix is public; the token itself is compared in constant time (net/token.hpp).
    bool ok =
        header.rfind(prefix, 0) == 0 &&
        net::constant_time_equal(std::string_view(header).substr(prefix.size()), options.token);
    if (ok) return true;
    auto now = net::login_limiter::clock::now();
    if (options.login_limiter &&
        !options.login_limiter->allow(req.remote_addr, "http", now, &retry_after))
      return false;
    if (presented && options.login_limiter)
      options.login_limiter->failed(req.remote_addr, "http", now);
    return false;
  }

  void routes();
  // Runs an inference on `target` (the route's model when empty).
  void infer(const httplib::Request& req, const std::string& body, httplib::Response& res,
             std::string target = {});
  // What a /versions/{version}/ route names: a served model's version `model@version` when there
  // is one (docs/versions.md), else `model` itself when {version} is the version it serves (a
  // version directory's name, parse_version); not_found naming every version it serves otherwise.
  expected<std::string> served_version(const std::string& model, const std::string& version);
  void metadata(const httplib::Request& req, httplib::Response& res);
  void model_ready(const httplib::Request& req, httplib::Response& res, std::string target = {});
  void index(const std::string& body, httplib::Response& res);
  void metrics(httplib::Response& res);
};

void front::impl::routes() {
  auto& s = server;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    std::chrono::seconds retry_after{0};
    if (req.path.rfind("/v2/health/", 0) == 0 || (console && console_public(req.path)) ||
        authorized(req, retry_after))
      return httplib::Server::HandlerResponse::Unhandled;
    // A client without the token does not keep its connection: it holds nothing while it has none.
    res.set_header("Connection", "close");
    close_after_answer();
    if (retry_after.count() > 0) {
      res.set_header("Retry-After", std::to_string(retry_after.count()));
      reply_json(res, 429, encode_error("too many failed logins from this address"));
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("WWW-Authenticate", "Bearer");
    reply_json(res, 401,
               encode_error("authentication required: send \"Authorization: Bearer TOKEN\""));
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;       // a handler's own error
    if (current_request_over_limit()) {  // its body's rest is unread: the connection closes
      res.set_header("Connection", "close");
      return reply_json(res, 413, encode_error("request body exceeds the size limit"));
    }
    if (res.status ==
        404) {  // a path a route has, with another method, is 405 naming the methods it takes
      const bool console_path = req.path == "/" || req.path.rfind("/console", 0) == 0;
      if (auto allow = allowed_methods(req.path); !allow.empty() && (console || !console_path)) {
        res.set_header("Allow", allow);
        return reply_json(res, 405,
                          encode_error("method " + req.method + " is not allowed on " + req.path +
                                       "; it takes " + allow));
      }
      return reply_json(res, 404, encode_error("no route " + req.method + " " + req.path));
    }
    if (res.status == 413)
      return reply_json(res, 413, encode_error("request body exceeds the size limit"));
    if (res.status == 400) return reply_json(res, 400, encode_error("malformed HTTP request"));
    reply_json(res, res.status, encode_error("HTTP " + std::to_string(res.status)));
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        reply_json(res, 500, encode_error("internal error: " + what));
      });
  s.Get("/v2/health/live",
        [](const httplib::Request&, httplib::Response& res) { reply_json(res, 200, "{}"); });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    auto answered = wait(rt.list_models("", 1), std::chrono::seconds(2));
    if (!answered)
      return reply_json(res, 503, encode_error("not ready: " + answered.error().message));
    reply_json(res, 200, "{}");
  });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, 200,
               json{{"name", "warm"},
                    {"version", "0.1.0"},
                    {"extensions", {"model_repository", "metrics", "binary_tensor_data"}}}
                   .dump());
  });
  s.Get(R"(/v2/models/([^/]+))",
        [this](const httplib::Request& req, httplib::Response& res) { metadata(req, res); });
  s.Get(R"(/v2/models/([^/]+)/versions/([^/]+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          auto target = served_version(req.matches[1], req.matches[2]);
          if (!target) return reply_error(res, target.error());
          auto described = v2::describe(rt, req.matches[1], *target, options.request_timeout);
          if (!described) return reply_error(res, described.error());
          reply_json(res, 200,
                     encode_model_metadata(req.matches[1], described->meta, described->versions));
        });
  s.Get(R"(/v2/models/([^/]+)/ready)",
        [this](const httplib::Request& req, httplib::Response& res) { model_ready(req, res); });
  s.Get(R"(/v2/models/([^/]+)/versions/([^/]+)/ready)",
        [this](const httplib::Request& req, httplib::Response& res) {
          auto target = served_version(req.matches[1], req.matches[2]);
          if (!target) return reply_error(res, target.error());
          model_ready(req, res, *target);
        });
  s.Post(R"(/v2/models/([^/]+)/infer)",
         with_body(options.max_request_bytes,
                   [this](const httplib::Request& req, const std::string& body,
                          httplib::Response& res) { infer(req, body, res); }));
  s.Post(
      R"(/v2/models/([^/]+)/versions/([^/]+)/infer)",
      with_body(options.max_request_bytes, [this](const httplib::Request& req,
                                                  const std::string& body, httplib::Response& res) {
        auto target = served_version(req.matches[1], req.matches[2]);
        if (!target) return reply_error(res, target.error());
        infer(req, body, res, *target);
      }));
  const auto control_bytes = control_body_limit(options.max_request_bytes);
  s.Post("/v2/repository/index",
         with_body(control_bytes, [this](const httplib::Request&, const std::string& body,
                                         httplib::Response& res) { index(body, res); }));
  s.Post(R"(/v2/repository/models/([^/]+)/load)",
         with_body(control_bytes, [this](const httplib::Request& req, const std::string& body,
                                         httplib::Response& res) {
           if (auto ok = check_control_body(body); !ok) return reply_error(res, ok.error());
           auto done = v2::load(rt, req.matches[1], options.request_timeout);
           if (!done) return reply_error(res, done.error());
           reply_json(res, 200, "{}");
         }));
  s.Post(R"(/v2/repository/models/([^/]+)/unload)",
         with_body(control_bytes, [this](const httplib::Request& req, const std::string& body,
                                         httplib::Response& res) {
           if (auto ok = check_control_body(body); !ok) return reply_error(res, ok.error());
           auto done = wait(rt.unload(req.matches[1]), options.request_timeout);
           if (!done) return reply_error(res, done.error());
           reply_json(res, 200, "{}");
         }));
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
  if (console) add_console_routes(s, rt, *console, options.request_timeout);
}

void front::impl::infer(const httplib::Request& req, const std::string& body,
                        httplib::Response& res, std::string target) {
  std::optional<std::size_t> json_length;  // the binary tensor data extension's header
  if (req.has_header(json_length_header)) {
    auto value = req.get_header_value(json_length_header);
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size())
      return reply_error(res, make_error(errc::invalid_argument,
                                         std::string(json_length_header) +
                                             " must be a byte count, not \"" + value + "\""));
    json_length = n;
  }
  // Room to decode first: many large bodies at once are decoded a few at a time.
  const std::uint64_t json_bytes =
      json_length ? std::min<std::uint64_t>(*json_length, body.size()) : body.size();
  auto room = decoding.acquire(decode_budget::estimate(json_bytes, body.size() - json_bytes),
                               options.decode_wait);
  if (!room)
    return reply_error(res, make_error(errc::unavailable,
                                       "too many request bodies are being decoded; retry later"));
  auto decoded = decode_infer_request(body, options.limits, json_length);
  if (!decoded) return reply_error(res, decoded.error());
  decoded->request.target = target.empty() ? std::string(req.matches[1]) : std::move(target);
  auto result = infer_and_wait(rt, std::move(decoded->request), options.request_timeout);
  if (!result) return reply_error(res, result.error());
  if (auto chosen = v2::select_outputs(*result, decoded->outputs); !chosen)
    return reply_error(res, chosen.error());
  // Each output as it asked (binary_outputs); the binary extension's framing once any is binary.
  const auto binary = binary_outputs(*decoded, result->outputs.size());
  if (std::find(binary.begin(), binary.end(), true) == binary.end())
    return reply_json(res, 200, encode_infer_response(*result, decoded->id));
  std::size_t header_bytes = 0;
  auto answer = encode_infer_response(*result, decoded->id, binary, &header_bytes);
  res.status = 200;
  res.set_header(json_length_header, std::to_string(header_bytes));
  set_body(res, std::move(answer), "application/octet-stream");
}

void front::impl::metadata(const httplib::Request& req, httplib::Response& res) {
  std::string name = req.matches[1];
  auto described = v2::describe(rt, name, name, options.request_timeout);
  if (!described) return reply_error(res, described.error());
  reply_json(res, 200, encode_model_metadata(name, described->meta, described->versions));
}

expected<std::string> front::impl::served_version(const std::string& model,
                                                  const std::string& version) {
  return v2::version_target(rt, model, version, options.request_timeout);
}

void front::impl::model_ready(const httplib::Request& req, httplib::Response& res,
                              std::string target) {
  if (target.empty()) target = req.matches[1];
  auto state = v2::state_of(rt, target, options.request_timeout);
  if (!state) return reply_error(res, state.error());
  if (*state != model_state::loaded)
    return reply_json(res, 400,
                      encode_error("model '" + target + "' is " + std::string(to_string(*state)) +
                                   ", not LOADED"));
  reply_json(res, 200, "{}");
}

void front::impl::index(const std::string& text, httplib::Response& res) {
  bool ready_only = false;
  if (!text.empty()) {
    auto body = json::parse(text, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return reply_json(res, 400, encode_error("body must be a JSON object"));
    if (auto ready = body.find("ready"); ready != body.end()) {
      if (!ready->is_boolean())
        return reply_json(res, 400, encode_error("\"ready\" must be true or false"));
      ready_only = ready->get<bool>();
    }
  }
  auto models = wait(rt.list_models(), options.request_timeout);
  if (!models) return reply_error(res, models.error());
  if (ready_only)
    models->erase(
        std::remove_if(models->begin(), models->end(),
                       [](const model_status& m) { return m.state != model_state::loaded; }),
        models->end());
  reply_json(res, 200, encode_repository_index(*models));
}

void front::impl::metrics(httplib::Response& res) {
  prometheus_options p;
  std::vector<model_status> models;
  if (options.per_model_metrics) {
    auto listed = wait(rt.list_models(), options.request_timeout);
    if (!listed) return reply_error(res, listed.error());
    models = std::move(*listed);
    p.models = &models;
  }
  res.status = 200;
  auto text = prometheus_text(rt.metrics(), rt.devices(), p);
  if (options.extra_metrics) text += options.extra_metrics();
  set_body(res, std::move(text), "text/plain; version=0.0.4; charset=utf-8");
}

expected<std::unique_ptr<front>> front::start(runtime& rt, front_options options) {
  if (options.threads == 0)
    return make_error(errc::invalid_argument, "the HTTP front needs at least one thread");
  if (auto problem = net::access_problem(options, "HTTP"); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  auto i = std::make_unique<impl>(rt, std::move(options));
  const bool tcp = i->options.unix_path.empty();
  if (tcp && i->options.tls) {
    auto context = net::ssl_server::make(*i->options.tls, "http/1.1");
    if (!context) return context.error();
    i->tls = std::move(*context);
  }
  gate_options gate;
  gate.limits.max_bytes = i->options.max_header_bytes;
  gate.limits.max_lines = i->options.max_header_lines;
  gate.idle_timeout = i->options.idle_timeout;
  gate.header_timeout = i->options.header_timeout;
  gate.first_header_timeout = i->options.first_header_timeout;
  gate.body_timeout = i->options.body_timeout;
  gate.min_body_rate = i->options.min_body_rate;
  gate.max_buffered_body_bytes = i->options.max_buffered_body_bytes;
  gate.max_connections = i->options.max_connections;
  gate.max_connections_per_address = i->options.max_connections_per_address;
  gate.classify = [max = i->options.max_request_bytes](std::string_view method,
                                                       std::string_view target) {
    return classify(max, method, target);
  };
  gate.log = i->options.log;
  if (i->options.max_request_bytes)
    gate.max_request_wire_bytes = 2 * i->options.max_request_bytes + (64 << 10);
  gate.threads = i->options.threads;
  i->server.start_gate(gate);
  i->server.set_payload_max_length(i->options.max_request_bytes);
  // httplib closes a kept-alive connection after 5 requests by default, and reconnect bursts cost
  // clients (docs/performance.md). Keep connections for as long as clients do.
  i->server.set_keep_alive_max_count(1u << 20);
  if (i->options.console) {
    console::monitor_options watched;
    watched.cluster = i->options.cluster;
    i->console = console::monitor::start(rt, std::move(watched));
  }
  i->routes();
  std::string why;
  std::uint16_t bound = 0;
  int fd = tcp ? net::listen_tcp(i->options.host, i->options.port, bound, why)
               : net::listen_unix(i->options.unix_path, why);
  if (fd < 0)
    return make_error(
        why.find("not a socket") != std::string::npos ? errc::invalid_argument : errc::unavailable,
        why);
  i->port = bound;
  auto* raw = i.get();
  i->listener = std::make_unique<socket_acceptor>(
      fd, tcp,
      [raw](int accepted) {
        auto tls = raw->current_tls();  // held while the gate opens a session of it
        raw->server.admit(accepted, tls.get());
      },
      i->options.log);
  return std::unique_ptr<front>(new front(std::move(i)));
}

front::front(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

front::~front() {
  stop();
}

void front::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->listener->stop();
  if (!impl_->options.unix_path.empty()) ::unlink(impl_->options.unix_path.c_str());
  impl_->server.stop_gate();
  impl_->console.reset();
}

expected<void> front::set_tls(std::shared_ptr<const net::tls_material> tls) {
  if (!impl_->options.unix_path.empty()) return {};
  const bool serving_tls = impl_->current_tls() != nullptr;
  if (!tls && serving_tls)
    return make_error(errc::invalid_argument, "TLS cannot be turned off while serving");
  if (tls && !serving_tls)
    return make_error(errc::invalid_argument, "TLS cannot be turned on while serving");
  if (!tls) return {};
  auto context = net::ssl_server::make(
      *tls, "http/1.1");  // outside the lock: new connections do not wait for it
  if (!context) return context.error();
  std::lock_guard<std::mutex> lock(impl_->tls_mutex);
  impl_->tls = std::move(*context);
  return {};
}

std::uint16_t front::port() const {
  return static_cast<std::uint16_t>(impl_->port);
}

std::string front::address() const {
  if (!impl_->options.unix_path.empty()) return "unix:" + impl_->options.unix_path;
  const auto& h = impl_->options.host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

}  // namespace warm::http
