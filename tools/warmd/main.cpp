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
#include <cerrno>
#include <chrono>
#include <iostream>
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
#include "reloads.hpp"
#include "remote_models.hpp"
#include "served_config.hpp"
#include "service.hpp"
#include "startup.hpp"
#include "tls_setup.hpp"
#include "warm/runtime.hpp"

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

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

// Stop and reload signals go to a self-pipe the main thread waits on. SIGINT/SIGTERM may be
// delivered to any thread — including OpenBLAS's, which exist before main() and so cannot inherit
// a blocked mask (blocking + sigwait lost the race now and then, and the default action killed
// the process). A handler instead, on whatever thread, writes the signal to the pipe.
bool install_stop_handler() {
  if (::pipe(signal_pipe) != 0) return false;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}

// The flags and the config file into `c`; the exit status when warmd stops here (--help, a
// usage error), nothing when it goes on.
std::optional<int> read_configuration(int argc, char** argv, warm::warmd::config& c) {
  CLI::App app{"warmd: the warm model-cache daemon (Cap'n Proto RPC, see schemas/warm.capnp)"};
  std::string config_file;
  warm::warmd::add_options(app, c, config_file);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }

  auto usage = [](const std::string& message) -> std::optional<int> {
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
  return std::nullopt;
}

// Blocks the stop signals on this thread, so that every thread warm starts from here on inherits
// the mask and the signals go to this thread (or to OpenBLAS's, which predate main), never to a
// thread that sits in an uninstrumented wait (ThreadSanitizer defers a handler until its thread
// returns to instrumented code: a signal that reached kj's epoll thread was never handled).
// Returns the mask before.
sigset_t block_stop_signals() {
  sigset_t stop_signals, previous_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &stop_signals, &previous_mask);
  return previous_mask;
}

// What the main thread serves while it waits for a stop signal.
struct running {
  warm::runtime& rt;
  warm::warmd::service& service;
  bool tls;      // the TCP fronts serve TLS (renewed on SIGHUP)
  bool serving;  // a served-models file or --serve-repo (reloaded on SIGHUP and RPC reloads)
  std::chrono::nanoseconds version_poll;
  warm::warmd::reload_queue& reloads;
  warm::http::front* http = nullptr;  // null without --http
#if WARM_HAVE_GRPC
  warm::grpc_front::front* grpc = nullptr;  // null without --grpc
#endif
  // The cluster's peer TLS, renewed with the fronts' on SIGHUP; empty outside a cluster.
  std::function<void(std::shared_ptr<const warm::net::tls_material>)> renew_peer_tls;
};

// Waits on the stop signals' pipe until SIGINT or SIGTERM, which it returns. Meanwhile it runs
// the reloads (SIGHUP, the RPC `reload`) and, with --serve-repo, rescans the repositories.
int wait_for_stop(const warm::warmd::config& c, running& r) {
  // poll() before read(): ThreadSanitizer runs a deferred handler only inside calls it knows to
  // block (poll is one, read is not), and here the handler is what ends the wait.
  // With --serve-repo the repositories' model directories are listed again every
  // max(--poll-seconds, 5 s): one that appears is served, one that goes is retired, as by a
  // reload. (Each served model's own directory is watched and polled by the runtime.)
  const int rescan_ms =
      c.serve_repo
          ? static_cast<int>(std::max<std::int64_t>(
                5000,
                std::chrono::duration_cast<std::chrono::milliseconds>(r.version_poll).count()))
          : -1;
  // A root that cannot be listed now (a store that refuses or is unreachable) changes nothing:
  // what is served stays, and it is listed again at the next rescan.
  const auto remote = warm::warmd::remote_models(c);
  std::string list_error;  // logged once per outage
  auto list_repositories = [&]() -> std::optional<std::vector<std::string>> {
    auto listed = warm::warmd::repository_models(c.repo, remote);
    if (!listed) {
      if (listed.error().message != list_error)
        spdlog::warn(
            "--serve-repo: the repositories cannot be listed now, what is served stays: {}",
            listed.error().message);
      list_error = listed.error().message;
      return std::nullopt;
    }
    if (!list_error.empty()) spdlog::info("--serve-repo: the repositories can be listed again");
    list_error.clear();
    return std::move(*listed);
  };
  std::vector<std::string> repository_dirs;
  if (c.serve_repo)
    if (auto listed = list_repositories()) repository_dirs = std::move(*listed);
  while (true) {
    int signal_number = 0;
    pollfd ready{signal_pipe[0], POLLIN, 0};
    int polled = 0;
    while ((polled = ::poll(&ready, 1, rescan_ms)) < 0 && errno == EINTR) {
    }
    if (polled == 0) {
      auto now = list_repositories();
      if (now && *now != repository_dirs) {
        repository_dirs = std::move(*now);
        spdlog::info("the repositories' model directories changed: reloading the served models");
        static_cast<void>(warm::warmd::reload(r.rt, c, r.serving));  // it logs what it did
      }
      continue;
    }
    while (::read(signal_pipe[0], &signal_number, sizeof signal_number) < 0 && errno == EINTR) {
    }
    if (signal_number != SIGHUP && signal_number != warm::warmd::reload_request)
      return signal_number;
    auto waiting = r.reloads.take();
    if (signal_number == SIGHUP && r.tls) {
      if (auto renewed = warm::warmd::reload_front_tls(c)) {
        if (auto set = r.service.set_tls(renewed); !set)
          spdlog::error("SIGHUP: Cap'n Proto listeners keep their TLS certificates: {}",
                        set.error().to_string());
        if (r.http && !c.http.empty() && c.http.rfind("unix:", 0) != 0) {
          if (auto set = r.http->set_tls(renewed); !set)
            spdlog::error("SIGHUP: the HTTP front keeps its TLS certificates: {}",
                          set.error().to_string());
        }
        if (r.renew_peer_tls) r.renew_peer_tls(renewed);  // for the peers dialled from now on
#if WARM_HAVE_GRPC
        if (r.grpc && c.grpc.rfind("unix:", 0) != 0) {
          if (auto set = r.grpc->set_tls(renewed); !set)
            spdlog::error("SIGHUP: the gRPC front keeps its TLS certificates: {}",
                          set.error().to_string());
        }
#endif
      }
    }
    if (signal_number == SIGHUP) spdlog::info("SIGHUP: reloading the served models");
    if (c.serve_repo)
      if (auto listed = list_repositories()) repository_dirs = std::move(*listed);
    auto outcome = warm::warmd::reload(r.rt, c, r.serving);
    for (auto& done : waiting)
      done(outcome);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!install_stop_handler()) return exit_failure;

  warm::warmd::config c;
  if (auto stop = read_configuration(argc, argv, c)) return *stop;
  auto usage = [](const std::string& message) {
    std::cerr << "warmd: " << message << "\n";
    return exit_usage;
  };
  auto fronts = warm::warmd::plan_fronts(c);
  if (!fronts) return usage(fronts.error().message);
  auto& service_options = fronts->service;
  auto& http_options = fronts->http;
#if WARM_HAVE_GRPC
  auto& grpc_options = fronts->grpc;
#endif
  raise_open_file_limit(c.max_connections + fronts->connections);

#if !WARM_HAVE_CLUSTER
  if (!c.cluster.empty())
    return usage(
        "--cluster: this warmd was built without cluster mode (-Dcluster=disabled, or no "
        "libgrpc++-dev)");
#endif

  if (auto set = warm::warmd::set_code_policy_from(c); !set) return usage(set.error().message);

  auto options = warm::warmd::runtime_options_from(c);
  if (!options) return usage(options.error().message);
  const auto version_poll = options->version_poll;
  // Served models: read before anything starts, so that a bad file stops the start.
  const bool serving = !c.model_config.empty() || c.serve_repo;
  std::optional<warm::served_models_config> served;
  if (serving) {
    auto read = warm::warmd::served_models_for(c.model_config, c.serve_repo, c.repo,
                                               warm::warmd::remote_models(c));
    if (!read) return usage(read.error().message);
    served = std::move(*read);
  }
  const sigset_t previous_mask = block_stop_signals();
  // Model runtimes start here, after the mask: their link threads must not take stop signals.
  if (auto attached = warm::warmd::attach_model_runtimes(c, *options); !attached)
    return usage(attached.error().message);
#if WARM_HAVE_CLUSTER
  // Misses go to the cluster once it is joined (below); until then, and after it is left, they
  // are served here.
  auto forwarding = std::make_shared<std::atomic<warm::cluster::cluster_mode*>>(nullptr);
  if (!c.cluster.empty()) {
    options->registry_store = [&c] { return warm::warmd::cluster_registry(c); };
    options->miss_handler = [forwarding](const std::string& model, warm::infer_request& request,
                                         warm::callback<warm::infer_result>& done) {
      auto* cluster = forwarding->load();
      return cluster && cluster->forward(model, request, done);
    };
  }
#endif
  auto rt = warm::runtime::create(std::move(*options));
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
  if (http_options && !c.cluster.empty())
    http_options->cluster = [forwarding](warm::callback<warm::cluster_info> done) {
      auto* cluster = forwarding->load();  // none until joined: shown as alone
      if (!cluster) return done(warm::cluster_info{});
      cluster->info(std::move(done));
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
    auto joined = warm::warmd::join_cluster(c, **rt, service_options.token, fronts->tls);
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
#if WARM_HAVE_GRPC
  running now{**rt,       **service,    fronts->tls != nullptr,
              serving,    version_poll, reloads,
              http.get(), grpc.get(),   {}};
#else
  running now{**rt,       **service, fronts->tls != nullptr, serving, version_poll, reloads,
              http.get(), {}};
#endif
#if WARM_HAVE_CLUSTER
  if (cluster.tls)
    now.renew_peer_tls = [&cluster](std::shared_ptr<const warm::net::tls_material> renewed) {
      cluster.tls->set(*renewed);
    };
#endif
  const int signal_number = wait_for_stop(c, now);
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
