// warmd: the warm daemon. Runs a warm::runtime and serves it over Cap'n Proto (schemas/warm.capnp)
// on unix sockets and TCP, and optionally KServe V2 HTTP with /metrics, until SIGINT/SIGTERM. Flags and the TOML config keys are documented in
// docs/configuration.md. Exit status: 0 after a clean shutdown, 1 when the runtime or a listener
// cannot start, 2 on a usage or configuration error.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <toml++/toml.h>

#include "http/http_front.hpp"
#include "service.hpp"
#include "warm/runtime.hpp"
#include "warm/units.hpp"

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

// Everything warmd can be told, with its defaults.
struct config {
  std::vector<std::string> repo;
  std::string state = "warm-state";
  std::vector<std::string> device{"host:1GiB"};
  std::string policy = "kdf";
  std::uint32_t max_concurrent_loads = 2;
  std::string failure_expiry = "10m";
  std::vector<std::string> listen{"unix:./warm.sock"};
  bool allow_remote = false;
  std::string token_file;
  std::string log_level = "info";
  std::string max_request_bytes = "64MiB";
  std::string max_tensor_bytes = "64MiB";
  std::string http;                 // HOST:PORT of the HTTP front; empty = none
  std::uint32_t http_threads = 32;
  bool metrics_per_model = false;
  std::string request_timeout = "5m";
  std::uint64_t max_models = 1'000'000;
};

// "10m", "30s", "500ms", "1h", "1.5s"; a bare number is seconds.
warm::expected<std::chrono::nanoseconds> parse_duration(const std::string& text) {
  auto bad = warm::make_error(warm::errc::invalid_argument,
                              "bad duration \"" + text + "\" (expected e.g. 500ms, 30s, 10m, 1h)");
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return bad;
  double value = 0;
  try {
    value = std::stod(text.substr(0, i));
  } catch (...) {
    return bad;
  }
  auto unit = text.substr(i);
  double seconds = 0;
  if (unit.empty() || unit == "s")
    seconds = value;
  else if (unit == "ms")
    seconds = value / 1000;
  else if (unit == "m" || unit == "min")
    seconds = value * 60;
  else if (unit == "h")
    seconds = value * 3600;
  else
    return bad;
  if (!(seconds >= 0) || seconds > 1e9) return bad;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

// Applies the TOML file's keys to the options the command line did not set. Keys are the flag
// names without dashes; repeatable ones take a string or an array of strings.
warm::expected<void> apply_config_file(const std::string& path, CLI::App& app, config& c) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return warm::make_error(warm::errc::invalid_argument, msg.str());
  }
  auto bad = [&](const std::string& key, const char* want) {
    return warm::make_error(warm::errc::invalid_argument, path + ": key \"" + key + "\" must be " + want);
  };
  auto given = [&](const std::string& key) { return app.get_option("--" + key)->count() > 0; };
  for (auto&& [k, node] : table) {
    std::string key(k.str());
    auto string_list = [&](std::vector<std::string>& out) -> warm::expected<void> {
      std::vector<std::string> values;
      if (auto s = node.value<std::string>()) {
        values.push_back(*s);
      } else if (auto* arr = node.as_array()) {
        for (auto& item : *arr) {
          auto s2 = item.value<std::string>();
          if (!s2) return bad(key, "a string or an array of strings");
          values.push_back(*s2);
        }
      } else {
        return bad(key, "a string or an array of strings");
      }
      if (!given(key)) out = std::move(values);
      return {};
    };
    auto string_value = [&](std::string& out) -> warm::expected<void> {
      auto s = node.value<std::string>();
      if (!s) return bad(key, "a string");
      if (!given(key)) out = *s;
      return {};
    };
    warm::expected<void> r;
    if (key == "repo") r = string_list(c.repo);
    else if (key == "device") r = string_list(c.device);
    else if (key == "listen") r = string_list(c.listen);
    else if (key == "state") r = string_value(c.state);
    else if (key == "policy") r = string_value(c.policy);
    else if (key == "failure-expiry") r = string_value(c.failure_expiry);
    else if (key == "token-file") r = string_value(c.token_file);
    else if (key == "log-level") r = string_value(c.log_level);
    else if (key == "max-request-bytes") r = string_value(c.max_request_bytes);
    else if (key == "max-tensor-bytes") r = string_value(c.max_tensor_bytes);
    else if (key == "http") r = string_value(c.http);
    else if (key == "request-timeout") r = string_value(c.request_timeout);
    else if (key == "max-models") {
      auto v = node.value<std::int64_t>();
      if (!v || *v < 1) return bad(key, "a positive integer");
      if (!given(key)) c.max_models = static_cast<std::uint64_t>(*v);
    } else if (key == "http-threads") {
      auto v = node.value<std::int64_t>();
      if (!v || *v < 1 || *v > 1024) return bad(key, "an integer from 1 to 1024");
      if (!given(key)) c.http_threads = static_cast<std::uint32_t>(*v);
    } else if (key == "metrics-per-model") {
      auto v = node.value<bool>();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.metrics_per_model = *v;
    }
    else if (key == "max-concurrent-loads") {
      auto v = node.value<std::int64_t>();
      if (!v || *v < 1 || *v > 64) return bad(key, "an integer from 1 to 64");
      if (!given(key)) c.max_concurrent_loads = static_cast<std::uint32_t>(*v);
    } else if (key == "allow-remote") {
      auto v = node.value<bool>();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.allow_remote = *v;
    } else {
      return warm::make_error(warm::errc::invalid_argument, path + ": unknown key \"" + key + "\"");
    }
    if (!r) return r;
  }
  return {};
}

warm::expected<std::string> read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) return warm::make_error(warm::errc::not_found, "cannot read token file " + path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.size() < 16) return warm::make_error(warm::errc::invalid_argument, "token in " + path + " is shorter than 16 bytes");
  return token;
}

// The stop signals' self-pipe (see main).
int signal_pipe[2] = {-1, -1};

void on_stop_signal(int signal_number) {
  int saved = errno;
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &signal_number, sizeof signal_number);
  errno = saved;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT/SIGTERM may be delivered to any thread — including OpenBLAS's, which exist before
  // main() and so cannot inherit a blocked mask (blocking + sigwait lost the race now and then,
  // and the default action killed the process). A handler instead, on whatever thread, writes
  // the signal to a pipe the main thread waits on.
  if (::pipe(signal_pipe) != 0) return exit_failure;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"warmd: the warm model-cache daemon (Cap'n Proto RPC, see schemas/warm.capnp)"};
  config c;
  std::string config_file;
  app.add_option("--config", config_file, "TOML config file; command-line flags override its keys")
      ->check(CLI::ExistingFile);
  app.add_option("--repo", c.repo, "Model repository root (repeatable)");
  app.add_option("--state", c.state, "State directory (registry.db)")->capture_default_str();
  app.add_option("--device", c.device, "Device spec, e.g. host:1GiB or cuda:0:8GiB (repeatable)")->capture_default_str();
  app.add_option("--policy", c.policy, "Eviction policy (docs/policies.md)")->capture_default_str();
  app.add_option("--max-concurrent-loads", c.max_concurrent_loads, "Loads at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--failure-expiry", c.failure_expiry, "How long a failed load blocks a device (500ms, 30s, 10m, 1h)")
      ->capture_default_str();
  app.add_option("--listen", c.listen, "unix:PATH or HOST:PORT (repeatable)")->capture_default_str();
  app.add_flag("--allow-remote", c.allow_remote, "Let TCP listeners bind non-loopback hosts (needs --token-file)");
  app.add_option("--token-file", c.token_file, "File holding the token remote clients must present");
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--max-request-bytes", c.max_request_bytes, "Largest request message")->capture_default_str();
  app.add_option("--max-tensor-bytes", c.max_tensor_bytes, "Largest input tensor")->capture_default_str();
  app.add_option("--max-models", c.max_models, "Registrations the registry accepts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--http", c.http, "Serve KServe V2 HTTP and /metrics on HOST:PORT (loopback unless --allow-remote)");
  app.add_option("--http-threads", c.http_threads, "HTTP requests served at once (a miss holds one while it loads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--metrics-per-model", c.metrics_per_model, "Add per-model series to /metrics (one per model)");
  app.add_option("--request-timeout", c.request_timeout, "Longest an HTTP request waits for a load")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }

  auto usage = [](const std::string& message) {
    std::cerr << "warmd: " << message << "\n";
    return exit_usage;
  };
  if (!config_file.empty()) {
    if (auto r = apply_config_file(config_file, app, c); !r) return usage(r.error().message);
  }
  auto level = spdlog::level::from_str(c.log_level);
  if (level == spdlog::level::off && c.log_level != "off") return usage("unknown log level \"" + c.log_level + "\"");
  spdlog::set_level(level);
  if (c.repo.empty()) return usage("at least one --repo is required");
  auto expiry = parse_duration(c.failure_expiry);
  if (!expiry) return usage(expiry.error().message);
  auto request_bytes = warm::parse_bytes(c.max_request_bytes);
  if (!request_bytes) return usage("--max-request-bytes: " + request_bytes.error().message);
  auto tensor_bytes = warm::parse_bytes(c.max_tensor_bytes);
  if (!tensor_bytes) return usage("--max-tensor-bytes: " + tensor_bytes.error().message);

  auto request_timeout = parse_duration(c.request_timeout);
  if (!request_timeout) return usage("--request-timeout: " + request_timeout.error().message);
  std::optional<warm::http::front_options> http_options;
  if (!c.http.empty()) {
    auto address = warm::warmd::parse_listen_address(c.http);
    if (!address || address->is_unix) return usage("--http takes HOST:PORT, not \"" + c.http + "\"");
    http_options.emplace();
    http_options->host = address->host;
    http_options->port = address->port;
    http_options->allow_remote = c.allow_remote;
    http_options->max_request_bytes = *request_bytes;
    http_options->limits.max_tensor_bytes = *tensor_bytes;
    http_options->threads = c.http_threads;
    http_options->per_model_metrics = c.metrics_per_model;
    http_options->request_timeout =
        std::max(std::chrono::seconds(1), std::chrono::duration_cast<std::chrono::seconds>(*request_timeout));
  }

  warm::warmd::service_options service_options;
  service_options.listen = c.listen;
  service_options.allow_remote = c.allow_remote;
  service_options.server.max_request_bytes = *request_bytes;
  service_options.server.max_tensor_bytes = *tensor_bytes;
  if (c.allow_remote) {
    if (c.token_file.empty()) return usage("--allow-remote needs --token-file");
    auto token = read_token(c.token_file);
    if (!token) return usage(token.error().message);
    service_options.token = *token;
    if (http_options) http_options->token = std::move(*token);
  }

  warm::runtime_options options;
  options.repositories = c.repo;
  options.state_dir = c.state;
  options.devices = c.device;
  options.policy = c.policy;
  options.max_concurrent_loads = c.max_concurrent_loads;
  options.failure_expiry = *expiry;
  options.max_models = c.max_models;
  auto rt = warm::runtime::create(std::move(options));
  if (!rt) {
    spdlog::error("cannot start the runtime: {}", rt.error().to_string());
    return rt.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
  }

  // HTTP first: once the RPC listeners accept, every listener is up (tests wait on that).
  std::unique_ptr<warm::http::front> http;
  if (http_options) {
    auto started = warm::http::front::start(**rt, std::move(*http_options));
    if (!started) {
      spdlog::error("cannot serve HTTP: {}", started.error().to_string());
      return started.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
    }
    http = std::move(*started);
    spdlog::info("serving HTTP on {}", http->address());
  }
  auto service = warm::warmd::service::start(**rt, std::move(service_options));
  if (!service) {
    spdlog::error("cannot listen: {}", service.error().to_string());
    return service.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
  }
  for (const auto& address : (*service)->bound()) spdlog::info("listening on {}", address);
  spdlog::info("warmd ready: {} device(s), policy {}, state {}", c.device.size(), c.policy, c.state);

  int signal_number = 0;
  while (::read(signal_pipe[0], &signal_number, sizeof signal_number) < 0 && errno == EINTR) {
  }
  spdlog::info("{}: stopping", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  if (http) http->stop();  // stop accepting; requests being served finish
  (*service)->stop();  // stop accepting, finish in-flight calls, close connections
  service->reset();
  rt->reset();  // after the RPC thread: waits for the runtime's inferences, closes the registry
  spdlog::info("warmd stopped");
  return 0;
}
