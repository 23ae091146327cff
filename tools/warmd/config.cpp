#include "config.hpp"

#include <sys/stat.h>
#include <CLI/CLI.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

namespace warm::warmd {

device_choice split_device_policies(const std::vector<std::string>& devices) {
  device_choice out;
  for (const auto& d : devices) {
    auto at = d.rfind('@');
    out.specs.push_back(at == std::string::npos ? d : d.substr(0, at));
    out.policies.push_back(at == std::string::npos ? "" : d.substr(at + 1));
  }
  return out;
}

expected<void> apply_policy_tuning(const config& c, policy_options& tuning,
                                   std::chrono::milliseconds& rescore_period) {
  auto duration = [](const std::string& flag,
                     const std::string& text) -> expected<std::chrono::nanoseconds> {
    auto d = parse_duration(text);
    if (!d) return make_error(errc::invalid_argument, "--" + flag + ": " + d.error().message);
    return *d;
  };
  auto period = duration("rescore-period", c.rescore_period);
  if (!period) return std::move(period).error();
  if (*period < std::chrono::milliseconds(10))
    return make_error(errc::invalid_argument, "--rescore-period must be at least 10ms");
  rescore_period = std::chrono::duration_cast<std::chrono::milliseconds>(*period);
  if (c.iam_rate != "ewma" && c.iam_rate != "window")
    return make_error(errc::invalid_argument,
                      "--iam-rate must be ewma or window, not \"" + c.iam_rate + "\"");
  tuning.iam_rate = c.iam_rate;
  auto rate_period = duration("iam-rate-period", c.iam_rate_period);
  if (!rate_period) return std::move(rate_period).error();
  if (rate_period->count() <= 0)
    return make_error(errc::invalid_argument, "--iam-rate-period must be positive");
  tuning.rate_tau = tuning.rate_window = *rate_period;
  if (!(c.iam_bias > 0) || c.iam_bias > 1e6)
    return make_error(errc::invalid_argument,
                      "--iam-bias must be greater than 0 (and at most 1e6)");
  tuning.iam_bias = c.iam_bias;
  if (c.kdf_tau != "auto") {
    auto tau = duration("kdf-tau", c.kdf_tau);
    if (!tau) return std::move(tau).error();
    tuning.kdf_tau = *tau;
  }
  if (!(c.kdf_horizon >= 0) || c.kdf_horizon > 1e6)
    return make_error(errc::invalid_argument, "--kdf-horizon must be between 0 and 1e6");
  tuning.kdf_horizon = c.kdf_horizon;
  if (c.kdf_memory != "auto") {
    double memory = 0;
    std::size_t used = 0;
    try {
      memory = std::stod(c.kdf_memory, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != c.kdf_memory.size() || !(memory > 0) || memory > 1e6)
      return make_error(
          errc::invalid_argument,
          "--kdf-memory must be auto or a number greater than 0 (and at most 1e6), not \"" +
              c.kdf_memory + "\"");
    tuning.kdf_memory = memory;
  }
  return {};
}

void add_options(CLI::App& app, config& c, std::string& config_file) {
  app.add_option("--config", config_file, "TOML config file; command-line flags override its keys")
      ->check(CLI::ExistingFile);
  app.add_option("--repo", c.repo,
                 "Model repository root: a directory, s3://BUCKET/PREFIX or http(s)://URL "
                 "(repeatable)");
  app.add_option("--s3-endpoint", c.s3_endpoint,
                 "An S3-compatible store's http(s)://HOST[:PORT] (MinIO, Ceph, R2); default AWS");
  app.add_option("--s3-region", c.s3_region,
                 "S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1)");
  app.add_option("--fetch-streams", c.fetch_streams,
                 "Ranged GETs of one remote model file in flight at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--fetch-part-bytes", c.fetch_part_bytes,
                 "The bytes each ranged GET asks for (at least 64KiB)")
      ->capture_default_str();
  app.add_option("--source-ca", c.source_ca,
                 "CA certificates (PEM) trusted for https model sources besides the system's: an "
                 "S3 endpoint or web server with a private CA")
      ->check(CLI::ExistingFile);
  app.add_flag("--load-after-fetch", c.load_after_fetch,
               "Load a remote model only once its whole file is in the disk tier (by default a "
               "load follows the fetch)");
  app.add_option("--cache-dir", c.cache_dir,
                 "The disk tier: where fetched model files are kept (default STATE/tier)");
  app.add_option("--cache-bytes", c.cache_bytes,
                 "The disk tier's budget, e.g. 20GiB (auto: twice the devices' capacity)")
      ->capture_default_str();
  app.add_option("--state", c.state, "State directory (registry.db)")->capture_default_str();
  app.add_option(
         "--device", c.device,
         "Device spec, e.g. host:1GiB or cuda:0:8GiB, with @POLICY for its own policy (repeatable)")
      ->capture_default_str();
  app.add_option(
      "--runtime", c.runtime,
      "Model runtime as a device: NAME=COMMAND (started and supervised) or NAME=unix:PATH "
      "(repeatable; docs/runtimes.md)");
  app.add_option("--runtime-load-timeout", c.runtime_load_timeout,
                 "A model runtime's load not answered by then fails")
      ->capture_default_str();
  app.add_option("--runtime-rss-slack", c.runtime_rss_slack,
                 "Memory a model runtime may hold beyond its models before warmd charges the rest "
                 "to its device")
      ->capture_default_str();
  app.add_option("--runtime-start-timeout", c.runtime_start_timeout,
                 "How long warmd waits for each model runtime to be ready when it starts")
      ->capture_default_str();
  app.add_option("--policy", c.policy,
                 "Eviction policy of devices that name none (docs/policies.md)")
      ->capture_default_str();
  app.add_option("--rescore-period", c.rescore_period,
                 "How often the importance scorer rebuilds score heaps")
      ->capture_default_str();
  app.add_option("--iam-rate", c.iam_rate, "iam's request-rate estimator: ewma or window")
      ->capture_default_str();
  app.add_option("--iam-rate-period", c.iam_rate_period,
                 "iam's rate time constant (ewma) or window length")
      ->capture_default_str();
  app.add_option("--iam-bias", c.iam_bias, "iam's b0 in rank = log(count + b0)")
      ->capture_default_str();
  app.add_option("--kdf-tau", c.kdf_tau,
                 "kdf's decay time constant of request counts: auto (follows the traffic) or a "
                 "duration (0 = no decay)")
      ->capture_default_str();
  app.add_option("--kdf-memory", c.kdf_memory,
                 "kdf's automatic tau in characteristic times of the cache: auto (chosen online) "
                 "or a number")
      ->capture_default_str();
  app.add_option("--kdf-horizon", c.kdf_horizon,
                 "kdf's saturation h of a model's value (0 = linear)")
      ->capture_default_str();
  app.add_option("--max-concurrent-loads", c.max_concurrent_loads, "Loads at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--failure-expiry", c.failure_expiry,
                 "How long a failed load blocks a device (500ms, 30s, 10m, 1h)")
      ->capture_default_str();
  app.add_option("--listen", c.listen, "unix:PATH or HOST:PORT (repeatable)")
      ->capture_default_str();
  app.add_flag("--allow-remote", c.allow_remote,
               "Let TCP listeners bind non-loopback hosts (needs --token-file)");
  app.add_option("--token-file", c.token_file,
                 "File holding the token every TCP client must present (Cap'n Proto, HTTP, gRPC)");
  app.add_option("--tls-cert", c.tls_cert,
                 "Serve TLS on every TCP front with this certificate chain (PEM, leaf first; read "
                 "again on SIGHUP)");
  app.add_option("--tls-key", c.tls_key,
                 "The --tls-cert certificate's private key (PEM, unencrypted, mode 600)");
  app.add_option(
      "--tls-client-ca", c.tls_client_ca,
      "Mutual TLS: TCP clients must present a certificate signed by a CA in this file (PEM)");
  app.add_flag("--in-process-code", c.in_process_code,
               "Load and run TorchScript models inside warmd: their code then runs with warmd's "
               "rights (by default "
               "they run in a sandboxed model runtime, --runtime)");
  app.add_option("--describe-helper", c.describe_helper,
                 "The program that describes TorchScript files in a sandbox (default: warm-runtime "
                 "beside warmd)");
  app.add_option("--describe-timeout", c.describe_timeout,
                 "How long describing a TorchScript file may take before its helper is stopped")
      ->capture_default_str();
  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--max-request-bytes", c.max_request_bytes, "Largest request message")
      ->capture_default_str();
  app.add_option("--max-tensor-bytes", c.max_tensor_bytes, "Largest input tensor")
      ->capture_default_str();
  app.add_option("--max-connections", c.max_connections,
                 "Cap'n Proto connections open at once (and gRPC's, apart)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option(
         "--max-pending-logins", c.max_pending_logins,
         "Remote Cap'n Proto connections not yet logged in, at once (an eighth per address)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--login-timeout", c.login_timeout,
                 "How long a remote connection may take to log in")
      ->capture_default_str();
  app.add_option("--max-failed-logins", c.max_failed_logins,
                 "Wrong tokens a peer address may present per minute, both fronts (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--max-watchers", c.max_watchers, "Watch streams open at once, all connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-watchers-per-connection", c.max_watchers_per_connection,
                 "Watch streams one connection may open")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option(
         "--max-queued-events", c.max_queued_events,
         "Events a watch stream queues for a listener that falls behind; older ones are dropped")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-models", c.max_models, "Registrations the registry accepts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--inline-inference-limit", c.inline_inference_limit,
                 "Largest hit (batch x parameters, multiply-adds) run on the RPC thread; larger "
                 "ones run on the inference threads")
      ->capture_default_str();
  app.add_option("--max-batch", c.max_batch,
                 "Dynamic batching: most rows in one pass over a model's weights (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  app.add_option("--max-queue-delay", c.max_queue_delay,
                 "Dynamic batching: how long a batch that is not full waits for more requests "
                 "(e.g. 500us, 2ms)")
      ->capture_default_str();
  app.add_option("--preferred-batch", c.preferred_batch,
                 "Dynamic batching: batch sizes run as soon as formed")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536));
  app.add_option("--batch-queue", c.batch_queue,
                 "Dynamic batching: requests queued per model before refusing")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--auto-batch", c.auto_batch,
                 "Automatic batching while --max-batch is 0: inferences queued for the inference "
                 "threads (cold-load waiters, a backlog) share passes of up to this many rows, "
                 "with no delay (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  app.add_option("--http", c.http,
                 "Serve KServe V2 HTTP and /metrics on HOST:PORT (loopback unless --allow-remote) "
                 "or unix:PATH (mode 0600, no token)");
  app.add_option("--grpc", c.grpc,
                 "Serve KServe V2 over gRPC on HOST:PORT (loopback unless --allow-remote) or "
                 "unix:PATH (mode 0600, no token)");
  app.add_option("--http-threads", c.http_threads,
                 "HTTP requests served at once (a miss holds one while it loads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--metrics-per-model", c.metrics_per_model,
               "Add per-model series to /metrics (one per model)");
  app.add_flag("--no-console", c.no_console,
               "Serve no console on the HTTP front (docs/console.md); the V2 routes stay");
  app.add_option("--cluster", c.cluster,
                 "Join a cluster coordinated by etcd at these client URLs (http://HOST:PORT, "
                 "comma-separated)")
      ->delimiter(',');
  app.add_option("--instance", c.instance,
                 "This instance's name in the cluster (default: the host name)");
  app.add_option("--advertise", c.advertise,
                 "Where the cluster's other instances reach this one (unix:PATH or HOST:PORT; "
                 "default: the first --listen)");
  app.add_option("--cluster-name", c.cluster_name,
                 "The cluster to join (its keys live under /warm/NAME/ in etcd)")
      ->capture_default_str();
  app.add_option("--etcd-ca", c.etcd_ca,
                 "With https --cluster URLs: the CA certificate (PEM) that signed etcd's (default: "
                 "the system's roots)");
  app.add_option("--etcd-cert", c.etcd_cert,
                 "With https --cluster URLs: this instance's client certificate (PEM) for etcd "
                 "(with --etcd-key)");
  app.add_option("--etcd-key", c.etcd_key, "The private key (PEM) of --etcd-cert");
  app.add_option("--etcd-user", c.etcd_user,
                 "etcd's authentication: log in as this user (with --etcd-password-file)");
  app.add_option("--etcd-password-file", c.etcd_password_file,
                 "etcd's authentication: the file holding --etcd-user's password (mode 600)");
  app.add_option("--lease-ttl", c.lease_ttl,
                 "Seconds this instance's record outlives it if it dies")
      ->capture_default_str()
      ->check(CLI::Range(2, 300));
  app.add_option("--drain-seconds", c.drain_seconds,
                 "On SIGTERM in a cluster: at most this long loading this instance's recent models "
                 "on peers before it leaves (0: leave at once)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  app.add_option("--copy-queue", c.copy_queue,
                 "In a cluster: requests in flight per copy of a model, sustained for a second, "
                 "that add copies on other instances (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--copy-cool-seconds", c.copy_cool_seconds,
                 "In a full cluster: how long a copy must stay nearly idle before it is dropped")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--model-config", c.model_config,
                 "Served-models file (TOML [[model]] tables: versions, labels, load policy); "
                 "re-read on SIGHUP");
  app.add_flag("--serve-repo", c.serve_repo,
               "Serve every model directory of the repositories, its versions managed (latest:1)");
  app.add_option("--poll-seconds", c.poll_seconds,
                 "How often served models' directories are looked at (seconds)")
      ->capture_default_str();
  app.add_option("--version-settle", c.version_settle,
                 "How long a new version's model file must stay unchanged before it is loaded")
      ->capture_default_str();
  app.add_option("--request-timeout", c.request_timeout, "Longest an HTTP request waits for a load")
      ->capture_default_str();
  app.add_option("--http-header-timeout", c.http_header_timeout,
                 "Longest an HTTP client may take to send a request head (408 after)")
      ->capture_default_str();
  app.add_option(
         "--http-body-timeout", c.http_body_timeout,
         "Longest an HTTP client may take to send a request body after its head (408 after)")
      ->capture_default_str();
}

expected<std::string> read_etcd_password(const std::string& path) {
  const std::string which = "etcd password file " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(errc::invalid_argument, "cannot read the " + which);
  if ((st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(
        errc::invalid_argument,
        which + " may be read or written by other users (mode " + mode + "); chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::invalid_argument, "cannot read the " + which);
  std::string password((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(errc::invalid_argument, "cannot read the " + which);
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r'))
    password.pop_back();
  if (password.empty()) return make_error(errc::invalid_argument, "the " + which + " is empty");
  return password;
}

}  // namespace warm::warmd
