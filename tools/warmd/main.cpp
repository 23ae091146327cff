// warmd: the warm daemon. Runs a warm::runtime and serves it over Cap'n Proto (schemas/warm.capnp)
// on unix sockets and TCP, and optionally KServe V2 HTTP with /metrics, until SIGINT/SIGTERM. Flags
// and the TOML config keys are documented in docs/configuration.md. Exit status: 0 after a clean
// shutdown, 1 when the runtime or a listener cannot start, 2 on a usage or configuration error.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "config.hpp"
#if WARM_HAVE_CLUSTER
#include "cluster_setup.hpp"
#include "storage/registry_storage.hpp"
#endif
#include "file_checks.hpp"
#include "http/http_front.hpp"
#if WARM_HAVE_GRPC
#include "grpc/grpc_front.hpp"
#endif
#include "net/login_limiter.hpp"
#include "reloads.hpp"
#include "remote/remote_device.hpp"
#include "served_config.hpp"
#include "service.hpp"
#include "tls_setup.hpp"
#include "warm/backend.hpp"
#include "warm/runtime.hpp"
#include "warm/units.hpp"

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

warm::expected<std::string> read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) return warm::make_error(warm::errc::not_found, "cannot read token file " + path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
    token.pop_back();
  if (token.size() < 16)
    return warm::make_error(warm::errc::invalid_argument,
                            "token in " + path + " is shorter than 16 bytes");
  return token;
}

// The stop signals' self-pipe (see main).
int signal_pipe[2] = {-1, -1};

void on_stop_signal(int signal_number) {
  int saved = errno;
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &signal_number, sizeof signal_number);
  errno = saved;
}

// Every connection holds a descriptor: raise the soft open-file limit to the hard one (1024 is a
// common soft default, no more than --max-connections alone), and say when even the hard limit
// leaves no room for every connection allowed. Running out is survived either way: the listeners
// pause and accept again once descriptors are free.
void raise_open_file_limit(std::uint64_t connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised{limit.rlim_max, limit.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  constexpr std::uint64_t own = 256;  // the runtime's own: threads' eventfds, SQLite, model files
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < connections + own)
    spdlog::warn(
        "the open-file limit is {}: fewer than the connections allowed ({}) plus {} for warmd "
        "itself; past it new connections wait in the listen backlog until descriptors are free "
        "(raise it with ulimit -n or LimitNOFILE=)",
        limit.rlim_cur, connections, own);
}

// Where a front (--http, --grpc) listens and who may use it, from its flag's HOST:PORT or
// unix:PATH; nothing when the value is neither. The token is set once it is read (TCP only: a
// unix socket's mode 0600 is its access rule).
std::optional<warm::net::front_access> front_access(
    const std::string& value, bool allow_remote,
    std::shared_ptr<warm::net::login_limiter> limiter) {
  auto address = warm::warmd::parse_listen_address(value);
  if (!address) return std::nullopt;
  warm::net::front_access access;
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
  ::sigaction(SIGHUP, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"warmd: the warm model-cache daemon (Cap'n Proto RPC, see schemas/warm.capnp)"};
  warm::warmd::config c;
  std::string config_file;
  warm::warmd::add_options(app, c, config_file);
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
    if (auto r = warm::warmd::apply_config_file(config_file, app, c); !r)
      return usage(r.error().message);
  }
  auto level = spdlog::level::from_str(c.log_level);
  if (level == spdlog::level::off && c.log_level != "off")
    return usage("unknown log level \"" + c.log_level + "\"");
  spdlog::set_level(level);
  if (c.repo.empty()) return usage("at least one --repo is required");
  auto expiry = warm::warmd::parse_duration(c.failure_expiry);
  if (!expiry) return usage(expiry.error().message);
  auto request_bytes = warm::parse_bytes(c.max_request_bytes);
  if (!request_bytes) return usage("--max-request-bytes: " + request_bytes.error().message);
  auto tensor_bytes = warm::parse_bytes(c.max_tensor_bytes);
  if (!tensor_bytes) return usage("--max-tensor-bytes: " + tensor_bytes.error().message);

  auto login_timeout = warm::warmd::parse_duration(c.login_timeout);
  if (!login_timeout) return usage("--login-timeout: " + login_timeout.error().message);
  if (login_timeout->count() <= 0) return usage("--login-timeout must be positive");
  // Failed logins on either front, per peer address; each is logged (never the token).
  warm::net::login_limiter::options login_limits;
  login_limits.failures_per_minute = c.max_failed_logins;
  login_limits.on_failure = [](const std::string& peer, const std::string& front, bool limited) {
    if (limited)
      spdlog::warn("{}: login refused from {}: too many failed logins (--max-failed-logins)", front,
                   peer);
    else
      spdlog::warn("{}: failed login from {}: wrong token", front, peer);
  };
  auto limiter = std::make_shared<warm::net::login_limiter>(std::move(login_limits));

  auto request_timeout = warm::warmd::parse_duration(c.request_timeout);
  if (!request_timeout) return usage("--request-timeout: " + request_timeout.error().message);
  auto header_timeout = warm::warmd::parse_duration(c.http_header_timeout);
  if (!header_timeout) return usage("--http-header-timeout: " + header_timeout.error().message);
  auto body_timeout = warm::warmd::parse_duration(c.http_body_timeout);
  if (!body_timeout) return usage("--http-body-timeout: " + body_timeout.error().message);
#if WARM_HAVE_GRPC
  std::optional<warm::grpc_front::front_options> grpc_options;
  if (!c.grpc.empty()) {
    auto access = front_access(c.grpc, c.allow_remote, limiter);
    if (!access) return usage("--grpc takes HOST:PORT or unix:PATH, not \"" + c.grpc + "\"");
    grpc_options.emplace();
    static_cast<warm::net::front_access&>(*grpc_options) = std::move(*access);
    grpc_options->max_request_bytes = *request_bytes;
    grpc_options->max_tensor_bytes = *tensor_bytes;
    grpc_options->threads = c.http_threads;
    grpc_options->log = [](const std::string& line) { spdlog::warn("{}", line); };
    grpc_options->max_connections = c.max_connections;  // its own, beside Cap'n Proto's
    grpc_options->request_timeout = at_least_1ms(*request_timeout);
  }
#else
  if (!c.grpc.empty()) return usage("--grpc: this warmd was built without gRPC (libgrpc++-dev)");
#endif
  std::optional<warm::http::front_options> http_options;
  if (!c.http.empty()) {
    auto access = front_access(c.http, c.allow_remote, limiter);
    if (!access) return usage("--http takes HOST:PORT or unix:PATH, not \"" + c.http + "\"");
    http_options.emplace();
    static_cast<warm::net::front_access&>(*http_options) = std::move(*access);
    http_options->max_request_bytes = *request_bytes;
    http_options->limits.max_tensor_bytes = *tensor_bytes;
    http_options->threads = c.http_threads;
    http_options->per_model_metrics = c.metrics_per_model;
    http_options->request_timeout = at_least_1ms(*request_timeout);
    http_options->header_timeout = at_least_1ms(*header_timeout);
    http_options->body_timeout = at_least_1ms(*body_timeout);
    http_options->log = [](const std::string& line) { spdlog::warn("{}", line); };
  }

  warm::warmd::service_options service_options;
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
  if (c.allow_remote && c.token_file.empty()) return usage("--allow-remote needs --token-file");
  if (!c.token_file.empty()) {
    auto token_warnings = warm::warmd::check_token_file(c.token_file);
    if (!token_warnings) return usage(token_warnings.error().message);
    for (const auto& warning : *token_warnings)
      spdlog::warn("{}", warning);
    auto token = read_token(c.token_file);
    if (!token) return usage(token.error().message);
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
  auto tls = warm::warmd::load_front_tls(c);
  if (!tls) return usage(tls.error().message);
  if (*tls) {
#if WARM_HAVE_GRPC
    if (grpc_options && grpc_options->unix_path.empty()) grpc_options->tls = *tls;
#endif
    service_options.tls = *tls;
    if (http_options && http_options->unix_path.empty()) http_options->tls = *tls;
  }

  std::size_t front_connections = http_options ? http_options->max_connections : 0;
#if WARM_HAVE_GRPC
  // With TLS a gRPC connection holds three descriptors: its socket and both ends of its relay.
  if (grpc_options)
    front_connections += grpc_options->max_connections * (grpc_options->tls ? 3 : 1);
#endif
  raise_open_file_limit(c.max_connections + front_connections);

#if !WARM_HAVE_CLUSTER
  if (!c.cluster.empty())
    return usage(
        "--cluster: this warmd was built without cluster mode (-Dcluster=disabled, or no "
        "libgrpc++-dev)");
#endif

  // Where TorchScript code runs: in a sandboxed runtime, described by a sandboxed helper.
  warm::code_policy code;
  code.in_process = c.in_process_code;
  auto describe_timeout = warm::warmd::parse_duration(c.describe_timeout);
  if (!describe_timeout) return usage("--describe-timeout: " + describe_timeout.error().message);
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
  warm::set_code_policy(std::move(code));

  auto state_warnings = warm::warmd::check_state_dir(c.state);
  if (!state_warnings) return usage(state_warnings.error().message);
  for (const auto& warning : *state_warnings)
    spdlog::warn("{}", warning);
  for (const auto& root : c.repo) {
    auto repo_warnings = warm::warmd::check_repository(root);
    if (!repo_warnings) return usage(repo_warnings.error().message);
    for (const auto& warning : *repo_warnings)
      spdlog::warn("{}", warning);
  }

  warm::runtime_options options;
  options.repositories = c.repo;
  options.state_dir = c.state;
  auto devices = warm::warmd::split_device_policies(c.device);
  options.devices = std::move(devices.specs);
  options.device_policies = std::move(devices.policies);
  options.policy = c.policy;
  if (auto r = warm::warmd::apply_policy_tuning(c, options.policy_tuning, options.rescore_period);
      !r)
    return usage(r.error().message);
  options.max_concurrent_loads = c.max_concurrent_loads;
  options.failure_expiry = *expiry;
  options.max_models = c.max_models;
  options.inline_inference_limit = c.inline_inference_limit;
  auto queue_delay = warm::warmd::parse_duration(c.max_queue_delay);
  if (!queue_delay) return usage("--max-queue-delay: " + queue_delay.error().message);
  options.batching.max_batch = c.max_batch;
  options.batching.max_queue_delay =
      std::chrono::duration_cast<std::chrono::microseconds>(*queue_delay);
  options.batching.preferred_batch = c.preferred_batch;
  options.batching.max_queue = c.batch_queue;
  auto poll = warm::warmd::parse_duration(c.poll_seconds);
  if (!poll) return usage("--poll-seconds: " + poll.error().message);
  if (*poll < std::chrono::milliseconds(1)) return usage("--poll-seconds must be at least 0.001");
  options.version_poll = *poll;
  auto settle = warm::warmd::parse_duration(c.version_settle);
  if (!settle) return usage("--version-settle: " + settle.error().message);
  options.version_settle = *settle;
  // Served models: read before anything starts, so that a bad file stops the start.
  const bool serving = !c.model_config.empty() || c.serve_repo;
  std::optional<warm::served_models_config> served;
  if (serving) {
    auto read = warm::warmd::served_models_for(c.model_config, c.serve_repo, c.repo);
    if (!read) return usage(read.error().message);
    served = std::move(*read);
  }
  // Every thread warm starts from here on inherits a mask blocking SIGINT/SIGTERM, so the signals
  // go to this thread (or to OpenBLAS's, which predate main), never to a thread that sits in an
  // uninstrumented wait (ThreadSanitizer defers a handler until its thread returns to
  // instrumented code: a signal that reached kj's epoll thread was never handled).
  sigset_t stop_signals, previous_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, &previous_mask);
  // Model runtimes start here, after the mask: their link threads must not take stop signals.
  auto load_timeout = warm::warmd::parse_duration(c.runtime_load_timeout);
  if (!load_timeout) return usage("--runtime-load-timeout: " + load_timeout.error().message);
  auto start_timeout = warm::warmd::parse_duration(c.runtime_start_timeout);
  if (!start_timeout) return usage("--runtime-start-timeout: " + start_timeout.error().message);
  for (const auto& text : c.runtime) {
    auto link = warm::parse_runtime_spec(text);
    if (!link) return usage("--runtime: " + link.error().message);
    link->load_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_least_1ms(*load_timeout));
    link->start_timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(at_least_1ms(*start_timeout));
    auto name = link->name;
    link->log = [](const std::string& line) { spdlog::warn("{}", line); };
    for (const auto& root : c.repo) {  // canonical, as the locations warmd sends name them
      std::error_code ec;
      auto canonical = std::filesystem::canonical(root, ec);
      link->repositories.push_back(ec ? root : canonical.string());
    }
    auto dev = warm::remote_device::start(std::move(*link));
    if (dev->ready())
      spdlog::info("runtime {} ready: {} capacity, {}", name, warm::format_bytes(dev->capacity()),
                   dev->state());
    else
      spdlog::warn("runtime {} is not ready yet ({}); warmd goes on and keeps trying", name,
                   dev->state());
    options.attached_devices.push_back({std::move(dev), ""});
  }
#if WARM_HAVE_CLUSTER
  // Misses go to the cluster once it is joined (below); until then, and after it is left, they
  // are served here.
  auto forwarding = std::make_shared<std::atomic<warm::cluster::cluster_mode*>>(nullptr);
  if (!c.cluster.empty()) {
    options.registry_store = [&c] { return warm::warmd::cluster_registry(c); };
    options.miss_handler = [forwarding](const std::string& model, warm::infer_request& request,
                                        warm::callback<warm::infer_result>& done) {
      auto* cluster = forwarding->load();
      return cluster && cluster->forward(model, request, done);
    };
  }
#endif
  auto rt = warm::runtime::create(std::move(options));
  if (!rt) {
    spdlog::error("cannot start the runtime: {}", rt.error().to_string());
    return rt.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
  }

  // HTTP first: once the RPC listeners accept, every listener is up (tests wait on that).
  std::unique_ptr<warm::http::front> http;
#if WARM_HAVE_CLUSTER
  if (http_options && !c.cluster.empty())
    http_options->extra_metrics = [forwarding] {
      auto* cluster = forwarding->load();  // HTTP stops before the cluster goes
      return cluster ? cluster->metrics_text() : std::string();
    };
#endif
  if (http_options) {
    auto started = warm::http::front::start(**rt, std::move(*http_options));
    if (!started) {
      spdlog::error("cannot serve HTTP: {}", started.error().to_string());
      return started.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
    }
    http = std::move(*started);
    spdlog::info("serving HTTP on {}", http->address());
  }
#if WARM_HAVE_GRPC
  std::unique_ptr<warm::grpc_front::front> grpc;
  if (grpc_options) {
    auto started = warm::grpc_front::front::start(**rt, std::move(*grpc_options));
    if (!started) {
      spdlog::error("cannot serve gRPC: {}", started.error().to_string());
      return started.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
    }
    grpc = std::move(*started);
    spdlog::info("serving gRPC on {}", grpc->address());
  }
#endif
  // Reloads (SIGHUP, and the RPC `reload`) run on this thread, one at a time: each re-reads the
  // served-models file (and the repositories, with --serve-repo) and applies it whole.
  warm::warmd::reload_queue reloads;
  service_options.server.reload = [&reloads](warm::callback<std::uint32_t> done) {
    if (!reloads.push(std::move(done))) return;
    int wake = warm::warmd::reload_request;
    [[maybe_unused]] auto n = ::write(signal_pipe[1], &wake, sizeof wake);
  };
  if (served) {
    auto applied = (*rt)->serve(*served).get();
    if (!applied) {
      spdlog::error("cannot serve the models: {}", applied.error().to_string());
      return exit_usage;
    }
    spdlog::info("serving {} versioned model(s)", served->models.size());
  }
#if WARM_HAVE_CLUSTER
  // Cluster mode: the membership starts with the runtime, before the listeners; it leaves the
  // cluster first at shutdown, so that peers stop counting on this instance before it stops.
  warm::warmd::joined_cluster cluster;
  if (!c.cluster.empty()) {
    auto joined = warm::warmd::join_cluster(c, **rt, service_options.token, *tls);
    if (!joined) {
      spdlog::error("cannot join the cluster: {}", joined.error().to_string());
      return joined.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
    }
    cluster = std::move(*joined);
    // Never cleared: the runtime, and every miss, ends before the cluster.
    forwarding->store(cluster.mode.get());
    service_options.server.cluster = [&cluster](warm::callback<warm::cluster_info> done) {
      cluster.mode->info(std::move(done));
    };
    service_options.relay_factory = cluster.mode->relay_factory();
    service_options.cluster_address = cluster.address;
  }
#endif
  auto service = warm::warmd::service::start(**rt, std::move(service_options));
  if (!service) {
    spdlog::error("cannot listen: {}", service.error().to_string());
    return service.error().code == warm::errc::invalid_argument ? exit_usage : exit_failure;
  }
  for (const auto& address : (*service)->bound())
    spdlog::info("listening on {}", address);
  spdlog::info(
      "warmd ready: {} device(s){}, policy {}, state {}", c.device.size() + c.runtime.size(),
      c.runtime.empty() ? std::string()
                        : " (" + std::to_string(c.runtime.size()) + " of them model runtimes)",
      c.policy, c.state);

  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);  // pending stop signals arrive now
  // poll() before read(): ThreadSanitizer runs a deferred handler only inside calls it knows to
  // block (poll is one, read is not), and here the handler is what ends the wait.
  // With --serve-repo the repositories' model directories are listed again every
  // max(--poll-seconds, 5 s): one that appears is served, one that goes is retired, as by a
  // reload. (Each served model's own directory is watched and polled by the runtime.)
  const int rescan_ms =
      c.serve_repo
          ? static_cast<int>(std::max<std::int64_t>(
                5000, std::chrono::duration_cast<std::chrono::milliseconds>(*poll).count()))
          : -1;
  auto repository_dirs =
      c.serve_repo ? warm::warmd::repository_models(c.repo) : std::vector<std::string>{};
  int signal_number = 0;
  while (true) {
    pollfd ready{signal_pipe[0], POLLIN, 0};
    int polled = 0;
    while ((polled = ::poll(&ready, 1, rescan_ms)) < 0 && errno == EINTR) {
    }
    if (polled == 0) {
      auto now = warm::warmd::repository_models(c.repo);
      if (now != repository_dirs) {
        repository_dirs = std::move(now);
        spdlog::info("the repositories' model directories changed: reloading the served models");
        static_cast<void>(warm::warmd::reload(**rt, c, serving));  // it logs what it did
      }
      continue;
    }
    while (::read(signal_pipe[0], &signal_number, sizeof signal_number) < 0 && errno == EINTR) {
    }
    if (signal_number != SIGHUP && signal_number != warm::warmd::reload_request) break;
    auto waiting = reloads.take();
    if (signal_number == SIGHUP && *tls) {
      if (auto renewed = warm::warmd::reload_front_tls(c)) {
        if (auto set = (*service)->set_tls(renewed); !set)
          spdlog::error("SIGHUP: Cap'n Proto listeners keep their TLS certificates: {}",
                        set.error().to_string());
        if (http && !c.http.empty() && c.http.rfind("unix:", 0) != 0) {
          if (auto set = http->set_tls(renewed); !set)
            spdlog::error("SIGHUP: the HTTP front keeps its TLS certificates: {}",
                          set.error().to_string());
        }
#if WARM_HAVE_CLUSTER
        if (cluster.tls) cluster.tls->set(*renewed);  // for the peers dialled from now on
#endif
#if WARM_HAVE_GRPC
        if (grpc && c.grpc.rfind("unix:", 0) != 0) {
          if (auto set = grpc->set_tls(renewed); !set)
            spdlog::error("SIGHUP: the gRPC front keeps its TLS certificates: {}",
                          set.error().to_string());
        }
#endif
      }
    }
    if (signal_number == SIGHUP) spdlog::info("SIGHUP: reloading the served models");
    if (c.serve_repo) repository_dirs = warm::warmd::repository_models(c.repo);
    auto outcome = warm::warmd::reload(**rt, c, serving);
    for (auto& done : waiting)
      done(outcome);
  }
  reloads.close();  // an RPC reload from now on is answered unavailable
  spdlog::info("{}: stopping", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
#if WARM_HAVE_CLUSTER
  // SIGTERM (a rolling restart): recent models are loaded on peers first, while this instance
  // still serves; then the record goes at once.
  if (cluster.mode && signal_number == SIGTERM)
    cluster.mode->drain(std::chrono::seconds(c.drain_seconds));
  if (cluster.mode) cluster.mode->leave();
#endif
  if (http) http->stop();  // stop accepting; requests being served finish
#if WARM_HAVE_GRPC
  if (grpc) grpc->stop();
#endif
  (*service)->stop();  // stop accepting, finish in-flight calls, close connections
  service->reset();
  rt->reset();  // after the RPC thread: waits for the runtime's inferences, closes the registry
  spdlog::info("warmd stopped");
  return 0;
}
