// warmd's settings: the flags, the TOML config file that may give any of them
// (docs/configuration.md), and the duration syntax. Pure parsing, no I/O beyond reading the config
// file, so the TOML side is testable from a string (fuzz/warmd_config_fuzz.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/policy_options.hpp"
#include "warm/units.hpp"

namespace CLI {
class App;
}

namespace warm::warmd {

// Everything warmd can be told, with its defaults.
struct config {
  std::vector<std::string> repo;
  std::string state = "warm-state";
  std::vector<std::string> device{"host:1GiB"};
  // Model runtimes (docs/runtimes.md): NAME=COMMAND (started and supervised) or NAME=unix:PATH.
  std::vector<std::string> runtime;
  std::string runtime_load_timeout = "2m";    // a runtime's load not answered by then fails
  std::string runtime_rss_slack = "64MiB";    // a runtime's memory beyond its models not charged
  std::string runtime_start_timeout = "15s";  // warmd waits this long for each runtime at start
  std::string policy = "kdf";
  std::uint32_t max_concurrent_loads = 2;
  std::string failure_expiry = "10m";
  std::vector<std::string> listen{"unix:./warm.sock"};
  bool allow_remote = false;
  std::string token_file;
  // TLS on every TCP front (Cap'n Proto, HTTP, gRPC; docs/configuration.md, TLS): the certificate
  // chain and key (PEM), and the CA clients' certificates must come from (mutual TLS; empty:
  // clients present none). Empty cert and key: plain TCP. SIGHUP reads them again.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // TorchScript is code: run it inside warmd only when asked (docs/runtimes.md, "Trust").
  bool in_process_code = false;
  std::string describe_helper;  // empty: warm-runtime beside warmd's executable
  std::string describe_timeout = "30s";
  std::string log_level = "info";
  std::string max_request_bytes = "64MiB";
  std::string max_tensor_bytes = "64MiB";
  // Cap'n Proto connections (docs/configuration.md): at once; not yet logged in at once (remote
  // listeners); how long one may take to log in; failed logins a peer may make per minute.
  std::uint32_t max_connections = 1024;
  std::uint32_t max_pending_logins = 64;
  std::string login_timeout = "5s";
  std::uint32_t max_failed_logins = 10;
  std::uint32_t max_watchers = 256;                // watch streams open at once, all connections
  std::uint32_t max_watchers_per_connection = 16;  // watch streams one connection may open
  std::uint32_t max_queued_events = 4096;  // events one watch stream queues for a slow reader
  std::string http;                        // HOST:PORT of the HTTP front; empty = none
  std::string grpc;                        // HOST:PORT of the KServe V2 gRPC front; empty = none
  std::uint32_t http_threads = 32;
  bool metrics_per_model = false;
  bool no_console = false;  // the HTTP front serves no console (docs/console.md)
  std::string request_timeout = "5m";
  std::string http_header_timeout =
      "10s";                              // a request head must arrive whole within this, else 408
  std::string http_body_timeout = "60s";  // its body within this after the head, else 408
  std::uint64_t max_models = 1'000'000;
  // Hits up to this many multiply-adds (batch x parameters) run on the RPC thread; larger ones on
  // the inference threads (runtime_options::inline_inference_limit). 256→256 at batch 16.
  std::uint64_t inline_inference_limit = 1'052'672;
  // Dynamic batching of every model (runtime_options::batching, warm/batching.hpp); 0: off.
  std::uint64_t max_batch = 0;
  std::string max_queue_delay = "0";           // how long a batch that is not full waits for more
  std::vector<std::uint64_t> preferred_batch;  // batch sizes run as soon as formed
  std::uint64_t batch_queue = 1024;            // requests queued per model; past it: unavailable
  // Automatic batching while max_batch is 0 (runtime_options::auto_batch): the inferences queued
  // for the inference threads share passes of up to this many rows, with no delay; 0: off.
  std::uint64_t auto_batch = 32;
  // The policies' tuning (docs/policies.md; defaults as in warm::policy_options).
  std::string rescore_period = "1s";    // the importance scorer's rebuild period
  std::string iam_rate = "ewma";        // iam's request-rate estimator: ewma or window
  std::string iam_rate_period = "60s";  // its time constant (ewma) or window length
  double iam_bias = 1.0;                // iam's b0 in rank = log(count + b0)
  std::string kdf_tau = "auto";         // kdf's decay time constant of request counts
  double kdf_horizon = 0;               // kdf's saturation h of a model's value
  std::string kdf_memory =
      "auto";  // kdf's automatic tau, in characteristic times (auto: chosen online)
  // Served models (docs/versions.md): a served-models file, every model directory of the
  // repositories, how often their directories are looked at, and how long a new version's model
  // file must stay unchanged before it is taken.
  std::vector<std::string> cluster;  // etcd client URLs; empty: warmd runs alone
  std::string instance;              // its name in the cluster; empty: the host name
  std::string advertise;             // where peers reach it; empty: the first --listen
  std::string cluster_name = "warm";
  std::uint32_t lease_ttl = 10;      // seconds its record outlives it
  std::uint32_t drain_seconds = 30;  // SIGTERM: at most this long loading recent models on peers
  double copy_queue = 2;             // requests in flight per copy that add copies; 0: never
  std::uint32_t copy_cool_seconds =
      60;  // how long a copy stays quiet before it may go (cluster full)
  // A secured etcd (docs/etcd-client.md): https --cluster URLs are checked against etcd_ca (PEM;
  // empty: the system's roots) and present etcd_cert with etcd_key (PEM) when given; etcd_user
  // logs in to etcd's authentication with the password in etcd_password_file. Empty: not used.
  std::string etcd_ca;
  std::string etcd_cert;
  std::string etcd_key;
  std::string etcd_user;
  std::string etcd_password_file;
  // Remote sources (docs/storage.md): an S3-compatible endpoint and region, the ranged GETs of one
  // fetch in flight at once and the bytes each asks for, and the disk tier (empty dir: STATE/tier;
  // bytes "auto": twice the devices' capacity).
  std::string s3_endpoint;
  std::string s3_region;
  std::uint32_t fetch_streams = 8;
  std::string fetch_part_bytes = "8MiB";
  std::string source_ca;          // extra CA certificates for https sources (PEM)
  bool load_after_fetch = false;  // loads wait for the whole file instead of following the fetch
  std::string cache_dir;
  std::string cache_bytes = "auto";
  std::string model_config;
  bool serve_repo = false;
  std::string poll_seconds = "1";
  std::string version_settle = "1s";
};

// "SPEC[@POLICY]" device arguments split into runtime_options' devices and device_policies
// ("" where no policy is named: the --policy of every device).
struct device_choice {
  std::vector<std::string> specs, policies;
};
device_choice split_device_policies(const std::vector<std::string>& devices);

// "10m", "30s", "500ms", "1h", "1.5s", "200us"; a bare number is seconds (warm/units.hpp).
using warm::parse_duration;

// The policy tuning the config asks for; invalid_argument naming the flag for a bad value.
expected<void> apply_policy_tuning(const config& c, policy_options& tuning,
                                   std::chrono::milliseconds& rescore_period);

// Registers warmd's flags on `app`, bound to `c` (and --config to `config_file`). Every TOML key
// apply_config_* accepts is one of these flags, so the file and the command line cannot drift.
void add_options(CLI::App& app, config& c, std::string& config_file);

// Applies a TOML document's keys to the options the command line did not set (`app` must hold
// add_options' flags; after app.parse() a flag given there wins). Keys are the flag names without
// dashes; repeatable ones take a string or an array of strings. Errors are invalid_argument
// prefixed with `name_for_errors`: malformed TOML (with its line), an unknown key, a mistyped
// value. Never throws for any input.
expected<void> apply_config_text(std::string_view text, const std::string& name_for_errors,
                                 CLI::App& app, config& c);

// apply_config_text on the file's contents, errors prefixed with `path` (not_found when it cannot
// be read).
expected<void> apply_config_file(const std::string& path, CLI::App& app, config& c);

// The etcd password in the file `path` (--etcd-password-file), its trailing line ending(s)
// removed. invalid_argument, naming the file and never its contents, when group or others may
// read or write it (as for --token-file: chmod 600 it), when it is empty, or when it cannot be
// read.
expected<std::string> read_etcd_password(const std::string& path);

}  // namespace warm::warmd
