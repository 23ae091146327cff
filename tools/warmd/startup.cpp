#include "startup.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "file_checks.hpp"
#include "net/login_limiter.hpp"
#include "remote/remote_device.hpp"
#include "sources/object_url.hpp"
#include "tls_setup.hpp"
#include "warm/backend.hpp"
#include "warm/units.hpp"

namespace warm::warmd {
namespace {

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

expected<std::string> read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read token file " + path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
    token.pop_back();
  if (token.size() < 16)
    return make_error(errc::invalid_argument, "token in " + path + " is shorter than 16 bytes");
  return token;
}

// Where a front (--http, --grpc) listens and who may use it, from its flag's HOST:PORT or
// unix:PATH; nothing when the value is neither. The token is set once it is read (TCP only: a
// unix socket's mode 0600 is its access rule).
std::optional<net::front_access> front_access(const std::string& value, bool allow_remote,
                                              std::shared_ptr<net::login_limiter> limiter) {
  auto address = parse_listen_address(value);
  if (!address) return std::nullopt;
  net::front_access access;
  if (address->is_unix) access.unix_path = address->path;
  access.host = address->host;
  access.port = address->port;
  access.allow_remote = allow_remote;
  access.login_limiter = std::move(limiter);
  return access;
}

// A configured timeout as the fronts take it: at least 1 ms (a zero deadline would refuse every
// request).
std::chrono::milliseconds at_least_1ms(std::chrono::nanoseconds d) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(d));
}

}  // namespace

expected<front_plan> plan_fronts(const config& c) {
  auto request_bytes = parse_bytes(c.max_request_bytes);
  if (!request_bytes) return bad("--max-request-bytes: " + request_bytes.error().message);
  auto tensor_bytes = parse_bytes(c.max_tensor_bytes);
  if (!tensor_bytes) return bad("--max-tensor-bytes: " + tensor_bytes.error().message);

  auto login_timeout = parse_duration(c.login_timeout);
  if (!login_timeout) return bad("--login-timeout: " + login_timeout.error().message);
  if (login_timeout->count() <= 0) return bad("--login-timeout must be positive");
  // Failed logins on either front, per peer address; each is logged (never the token).
  net::login_limiter::options login_limits;
  login_limits.failures_per_minute = c.max_failed_logins;
  login_limits.on_failure = [](const std::string& peer, const std::string& front, bool limited) {
    if (limited)
      spdlog::warn("{}: login refused from {}: too many failed logins (--max-failed-logins)", front,
                   peer);
    else
      spdlog::warn("{}: failed login from {}: wrong token", front, peer);
  };
  auto limiter = std::make_shared<net::login_limiter>(std::move(login_limits));

  auto request_timeout = parse_duration(c.request_timeout);
  if (!request_timeout) return bad("--request-timeout: " + request_timeout.error().message);
  auto header_timeout = parse_duration(c.http_header_timeout);
  if (!header_timeout) return bad("--http-header-timeout: " + header_timeout.error().message);
  auto body_timeout = parse_duration(c.http_body_timeout);
  if (!body_timeout) return bad("--http-body-timeout: " + body_timeout.error().message);
#if WARM_HAVE_GRPC
  std::optional<grpc_front::front_options> grpc_options;
  if (!c.grpc.empty()) {
    auto access = front_access(c.grpc, c.allow_remote, limiter);
    if (!access) return bad("--grpc takes HOST:PORT or unix:PATH, not \"" + c.grpc + "\"");
    grpc_options.emplace();
    static_cast<net::front_access&>(*grpc_options) = std::move(*access);
    grpc_options->max_request_bytes = *request_bytes;
    grpc_options->max_tensor_bytes = *tensor_bytes;
    grpc_options->threads = c.http_threads;
    grpc_options->log = [](const std::string& line) { spdlog::warn("{}", line); };
    grpc_options->max_connections = c.max_connections;  // its own, beside Cap'n Proto's
    grpc_options->request_timeout = at_least_1ms(*request_timeout);
  }
#else
  if (!c.grpc.empty()) return bad("--grpc: this warmd was built without gRPC (libgrpc++-dev)");
#endif
  std::optional<http::front_options> http_options;
  if (!c.http.empty()) {
    auto access = front_access(c.http, c.allow_remote, limiter);
    if (!access) return bad("--http takes HOST:PORT or unix:PATH, not \"" + c.http + "\"");
    http_options.emplace();
    static_cast<net::front_access&>(*http_options) = std::move(*access);
    http_options->max_request_bytes = *request_bytes;
    http_options->limits.max_tensor_bytes = *tensor_bytes;
    http_options->threads = c.http_threads;
    http_options->per_model_metrics = c.metrics_per_model;
    http_options->console = !c.no_console;
    http_options->request_timeout = at_least_1ms(*request_timeout);
    http_options->header_timeout = at_least_1ms(*header_timeout);
    http_options->body_timeout = at_least_1ms(*body_timeout);
    http_options->log = [](const std::string& line) { spdlog::warn("{}", line); };
  }

  service_options service_options;
  service_options.listen = c.listen;
  service_options.allow_remote = c.allow_remote;
  service_options.server.max_request_bytes = *request_bytes;
  service_options.server.max_tensor_bytes = *tensor_bytes;
  service_options.server.max_watchers = c.max_watchers;
  service_options.server.max_queued_events = c.max_queued_events;
  service_options.server.max_watchers_per_connection = c.max_watchers_per_connection;
  service_options.max_connections = c.max_connections;
  service_options.max_pending_logins = c.max_pending_logins;
  service_options.login_timeout = *login_timeout;
  service_options.limiter = limiter;
  // A token, when given, guards every TCP front, loopback or not: a loopback port is open to every
  // local user, where the unix socket (0600) is open to warmd's own user only.
  if (c.allow_remote && c.token_file.empty()) return bad("--allow-remote needs --token-file");
  if (!c.token_file.empty()) {
    auto token_warnings = check_token_file(c.token_file);
    if (!token_warnings) return bad(token_warnings.error().message);
    for (const auto& warning : *token_warnings)
      spdlog::warn("{}", warning);
    auto token = read_token(c.token_file);
    if (!token) return bad(token.error().message);
    service_options.token = *token;
#if WARM_HAVE_GRPC
    if (grpc_options && grpc_options->unix_path.empty()) grpc_options->token = *token;
#endif
    if (http_options && http_options->unix_path.empty()) http_options->token = std::move(*token);
  } else if (c.tls_client_ca
                 .empty()) {  // with mutual TLS, clients prove who they are by certificate
    auto open_to_local_users = [](const std::string& front, const std::string& address) {
      spdlog::warn("{} on {} has no token: every local user may use it (--token-file)", front,
                   address);
    };
#if WARM_HAVE_GRPC
    if (grpc_options && grpc_options->unix_path.empty()) open_to_local_users("gRPC", c.grpc);
#endif
    if (http_options && http_options->unix_path.empty()) open_to_local_users("HTTP", c.http);
    for (const auto& address : c.listen)
      if (address.rfind("unix:", 0) != 0) open_to_local_users("Cap'n Proto", address);
  }

  // TLS on every TCP front (a unix socket stays plain).
  auto tls = load_front_tls(c);
  if (!tls) return bad(tls.error().message);
  if (*tls) {
#if WARM_HAVE_GRPC
    if (grpc_options && grpc_options->unix_path.empty()) grpc_options->tls = *tls;
#endif
    service_options.tls = *tls;
    if (http_options && http_options->unix_path.empty()) http_options->tls = *tls;
  }

  front_plan plan;
  plan.connections = http_options ? http_options->max_connections : 0;
#if WARM_HAVE_GRPC
  // With TLS a gRPC connection holds three descriptors: its socket and both ends of its relay.
  if (grpc_options) plan.connections += grpc_options->max_connections * (grpc_options->tls ? 3 : 1);
  plan.grpc = std::move(grpc_options);
#endif
  plan.http = std::move(http_options);
  plan.service = std::move(service_options);
  plan.tls = std::move(*tls);
  return plan;
}

expected<void> set_code_policy_from(const config& c) {
  // Where TorchScript code runs: in a sandboxed runtime, described by a sandboxed helper.
  code_policy code;
  code.in_process = c.in_process_code;
  auto describe_timeout = parse_duration(c.describe_timeout);
  if (!describe_timeout) return bad("--describe-timeout: " + describe_timeout.error().message);
  code.describe_deadline =
      std::chrono::duration_cast<std::chrono::milliseconds>(at_least_1ms(*describe_timeout));
  code.describe_helper = c.describe_helper;
  if (code.describe_helper.empty()) {
    std::error_code ec;
    auto beside =
        std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "warm-runtime";
    if (!ec && ::access(beside.c_str(), X_OK) == 0) code.describe_helper = beside.string();
  }
  if (code.in_process)
    spdlog::warn(
        "--in-process-code: TorchScript models load and run inside warmd; a model file can then "
        "read and write whatever warmd can. Serve them from a model runtime (--runtime) instead "
        "where others can publish models");
  else if (code.describe_helper.empty())
    spdlog::warn(
        "no describe helper (warm-runtime beside warmd, or --describe-helper): TorchScript models "
        "cannot be registered");
  set_code_policy(std::move(code));
  return {};
}

expected<runtime_options> runtime_options_from(const config& c) {
  auto expiry = parse_duration(c.failure_expiry);
  if (!expiry) return bad(expiry.error().message);
  auto state_warnings = check_state_dir(c.state);
  if (!state_warnings) return bad(state_warnings.error().message);
  for (const auto& warning : *state_warnings)
    spdlog::warn("{}", warning);
  for (const auto& root : c.repo) {
    if (sources::is_remote(root)) continue;  // looked at when the runtime starts
    auto repo_warnings = check_repository(root);
    if (!repo_warnings) return bad(repo_warnings.error().message);
    for (const auto& warning : *repo_warnings)
      spdlog::warn("{}", warning);
  }

  runtime_options options;
  options.repositories = c.repo;
  options.state_dir = c.state;
  options.sources.s3_endpoint = c.s3_endpoint;
  options.sources.s3_region = c.s3_region;
  options.sources.fetch_streams = c.fetch_streams;
  options.sources.cache_dir = c.cache_dir;
  auto part = parse_bytes(c.fetch_part_bytes);
  if (!part || *part < (64u << 10))
    return bad("--fetch-part-bytes must be a size of at least 64KiB, such as 8MiB, not \"" +
               c.fetch_part_bytes + "\"");
  options.sources.fetch_part_bytes = *part;
  options.sources.follow_fetch = !c.load_after_fetch;
  options.sources.ca_file = c.source_ca;
  if (c.cache_bytes != "auto") {
    auto bytes = parse_bytes(c.cache_bytes);
    if (!bytes || *bytes == 0)
      return bad("--cache-bytes must be auto or a size such as 20GiB, not \"" + c.cache_bytes +
                 "\"");
    options.sources.cache_bytes = *bytes;
  }
  auto devices = split_device_policies(c.device);
  options.devices = std::move(devices.specs);
  options.device_policies = std::move(devices.policies);
  options.policy = c.policy;
  if (auto r = apply_policy_tuning(c, options.policy_tuning, options.rescore_period); !r)
    return bad(r.error().message);
  options.max_concurrent_loads = c.max_concurrent_loads;
  options.failure_expiry = *expiry;
  options.max_models = c.max_models;
  options.inline_inference_limit = c.inline_inference_limit;
  auto queue_delay = parse_duration(c.max_queue_delay);
  if (!queue_delay) return bad("--max-queue-delay: " + queue_delay.error().message);
  options.batching.max_batch = c.max_batch;
  options.batching.max_queue_delay =
      std::chrono::duration_cast<std::chrono::microseconds>(*queue_delay);
  options.batching.preferred_batch = c.preferred_batch;
  options.batching.max_queue = c.batch_queue;
  options.auto_batch = c.auto_batch;
  auto poll = parse_duration(c.poll_seconds);
  if (!poll) return bad("--poll-seconds: " + poll.error().message);
  if (*poll < std::chrono::milliseconds(1)) return bad("--poll-seconds must be at least 0.001");
  options.version_poll = *poll;
  auto settle = parse_duration(c.version_settle);
  if (!settle) return bad("--version-settle: " + settle.error().message);
  options.version_settle = *settle;
  return options;
}

expected<void> attach_model_runtimes(const config& c, runtime_options& options) {
  auto load_timeout = parse_duration(c.runtime_load_timeout);
  if (!load_timeout) return bad("--runtime-load-timeout: " + load_timeout.error().message);
  auto rss_slack = parse_bytes(c.runtime_rss_slack);
  if (!rss_slack) return bad("--runtime-rss-slack: " + rss_slack.error().message);
  auto start_timeout = parse_duration(c.runtime_start_timeout);
  if (!start_timeout) return bad("--runtime-start-timeout: " + start_timeout.error().message);
  // warm-mmesh beside warmd bridges to runtimes that speak ModelMesh's interface (grpc: forms).
  std::string bridge;
  {
    std::error_code ec;
    auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "warm-mmesh";
    if (!ec && ::access(beside.c_str(), X_OK) == 0) bridge = beside.string();
  }
  for (const auto& text : c.runtime) {
    auto link = parse_runtime_spec(text, bridge);
    if (!link) return bad("--runtime: " + link.error().message);
    link->load_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_least_1ms(*load_timeout));
    link->rss_slack = *rss_slack;
    link->start_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_least_1ms(*start_timeout));
    auto name = link->name;
    link->log = [](const std::string& line) { spdlog::warn("{}", line); };
    for (const auto& root : c.repo) {  // canonical, as the locations warmd sends name them
      std::error_code ec;
      auto canonical = std::filesystem::canonical(root, ec);
      link->repositories.push_back(ec ? root : canonical.string());
    }
    auto dev = remote_device::start(std::move(*link));
    if (dev->ready())
      spdlog::info("runtime {} ready: {} capacity, {}", name, format_bytes(dev->capacity()),
                   dev->state());
    else
      spdlog::warn("runtime {} is not ready yet ({}); warmd goes on and keeps trying", name,
                   dev->state());
    options.attached_devices.push_back({std::move(dev), ""});
  }
  return {};
}

}  // namespace warm::warmd
