// warm-bench scenarios. Each prints one JSON object per run on stdout and compares against a
// baseline measured in the same run (a ratio), because shared machines are noisy.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "warm/runtime.hpp"

namespace warm::bench {

struct load_options {
  std::string backend = "dense";  // or "torchscript" (run_torch_load in load_bench.cpp)
  std::uint64_t bytes = std::uint64_t{1} << 30;  // model size to write and load
  std::string dir;                               // where to write it (default: a temp dir)
  int repeats = 7;                               // interleaved load / read pairs; medians reported
};
// `load`: loading onto a host device vs plain read() of the same bytes from the page cache.
int run_load(const load_options& options);

struct exec_options {
  std::vector<std::uint64_t> layers{256, 256};
  double seconds = 2.0;
  std::uint64_t batch = 1;
  std::string device = "host";  // a device spec without capacity: "host", "cuda:0"
};
// `exec`: direct executor throughput and latency for a small model on one device.
int run_exec(const exec_options& options);

struct coldstorm_options {
  std::uint64_t requests = 1000;  // concurrent requests fired at the cold model
  std::vector<std::uint64_t> layers{2048, 2048, 2048};  // ~32 MiB of weights: a load of some ms
  std::string kind =
      "ensure";  // "ensure": ensureLoaded(sync) requests; "infer": batch-1 inferences
  std::uint64_t max_batch = 0;  // the runtime's dynamic batching (0: off), for --kind infer
  std::optional<std::uint64_t> auto_batch;  // the runtime's automatic batching; none: its default
};
// `coldstorm`: N concurrent inferences (callback API) at one registered, unloaded model. Reports
// how many loads ran (1 is the contract), the load time and when the last answer arrived;
// ratio = last_answer_ms / load_ms.
int run_coldstorm(const coldstorm_options& options);

struct batch_options {
  std::vector<std::uint64_t> layers{1024, 1024, 1024};
  int clients = 32;              // closed-loop batch-1 clients per phase
  double seconds = 8.0;          // total, split evenly over rounds x 2 phases
  int rounds = 4;                // rotated batched / unbatched rounds
  std::uint64_t max_batch = 32;  // the batched model's options
  std::chrono::microseconds max_queue_delay{0};
  std::string device = "host";  // a device spec without capacity: "host", "cuda:0"
};

// Throughput and tail latency of concurrent batch-1 clients, with and without dynamic batching.
int run_batch(const batch_options& options);

struct hitpath_options {
  std::string backend = "dense";  // or "torchscript": the small CNN of tools/torch_models.py
  std::vector<std::uint64_t> layers{256, 256};  // dense
  double seconds = 5.0;                         // total, split evenly over rounds x 3 phases
  int threads = 2;                              // client threads per phase
  int rounds = 4;  // interleaved direct / warm / warm-future rounds; medians reported
};
// `hitpath`: inference on a loaded model through warm::runtime::infer (callback and future forms)
// vs the model run directly: device::infer on the same dense model loaded onto a separate host
// device, or forward() of the same TorchScript file loaded with torch::jit::load.
// ratio = the median over rounds of warm_rps / direct_rps.
int run_hitpath(const hitpath_options& options);

struct rpc_options {
  std::vector<std::uint64_t> layers{256, 256};
  double seconds = 5.0;  // total, split evenly over rounds x 2 phases
  int clients = 4;       // client threads (one connection and kj event loop each) per phase
  int rounds = 4;        // interleaved warm / echo rounds; medians reported
  // --runtime: compare the model served from a model runtime (this command, started and
  // supervised; default: warm-runtime beside warm-bench) with the same model on the host device,
  // both through warmd's RPC service, instead of warm with the echo server.
  bool runtime = false;
  std::string runtime_command;
};
// `rpc`: batch-1 inference over Cap'n Proto on a unix socket (warmd's service and warm_server in
// process, one loaded model) vs a bare Cap'n Proto server answering the same messages (echo).
// ratio = the median over rounds of warm_rps / echo_rps. With `runtime`: ratio = the median over
// rounds of runtime_rps / host_rps.
int run_rpc(const rpc_options& options);

struct hol_options {
  std::vector<std::uint64_t> small_layers{256, 256};
  std::vector<std::uint64_t> large_layers{4096, 4096, 4096};
  std::uint64_t large_batch = 64;
  double seconds = 5.0;                                 // total: half alone, half loaded
  std::uint64_t inline_limit = (256 * 256 + 256) * 16;  // warmd's default --inline-inference-limit
};
// `hol`: head-of-line blocking on the RPC thread. Batch-1 calls on a small model over one
// connection, timed alone and then while another connection sends large inferences back to back.
// ratio = small p99 loaded / small p99 alone.
int run_hol(const hol_options& options);

struct http_options {
  std::vector<std::uint64_t> layers{256, 256};
  double seconds = 5.0;  // total, split evenly over rounds x 3 phases
  int connections = 8;   // client threads (one keep-alive httplib::Client each) per phase
  int rounds = 4;        // interleaved warm / baseline / work rounds; medians reported
  bool binary = false;   // the binary tensor data extension both ways instead of JSON data
};
// `http`: batch-1 KServe V2 inference over HTTP (warm::http::front over a runtime with one loaded
// model) vs a bare httplib::Server answering warm's pre-encoded response, and vs one that decodes,
// runs the model on a device directly and encodes (the work baseline). ratio = the median over
// rounds of warm_rps / baseline_rps, work_ratio that of warm_rps / work_rps.
int run_http(const http_options& options);

struct rollout_options {
  std::vector<std::uint64_t> layers{1024, 1024, 1024};  // 8 MiB of weights per version
  int clients = 4;      // closed-loop batch-1 client threads, for the whole run
  int rounds = 8;       // steady window + roll, this many times
  int steady_ms = 300;  // each steady window
  int poll_ms = 10;     // runtime_options::version_poll
  int settle_ms = 20;   // runtime_options::version_settle
  std::string load_policy = "availability-preserving";
};
// `rollout`: clients of a served model while new versions roll in, against steady windows in the
// same run. ratio = p99 during rolls / p99 steady.
int run_rollout(const rollout_options& options);

struct soak_options {
  double seconds = 60;        // traffic duration
  int clients = 8;            // client threads (one connection and kj event loop each)
  std::uint64_t models = 16;  // dense models of 64 KiB..2 MiB on a device holding ~40% of them
  double failure_rate = 0.2;  // share of loads the fault-injecting loader fails
  double allocation_failure_rate = 0;  // share of the device's allocations failing (out of memory)
  std::uint64_t seed = 1;              // the fault injector's and the clients' generators
};
// `soak`: mixed traffic over Cap'n Proto (infer, ensureLoaded, register/unregister, vmodel flips)
// against warmd's service over a runtime whose loader fails `failure_rate` of loads. Counts
// requests, replies and lost calls; after unregistering everything, the device bytes still
// charged (accounting drift); RSS growth between the first and last quarter. Non-zero exit when
// lost > 0, drift != 0 or RSS growth >= 5%.
int run_soak(const soak_options& options);

struct registry_options {
  std::uint64_t models = 100000;  // ids registered, all naming the same model file
  std::uint64_t queries = 10000;  // sequential status() calls on random ids
  std::uint64_t touch = 0;  // then load this many of them (each gets a model actor and a slot)
};
// `registry`: throughput of asynchronous registrations, resident memory per registered model,
// and status() latency.
int run_registry(const registry_options& options);

struct evict_options {
  std::uint64_t bytes = std::uint64_t{2} << 30;  // size of each of the two large models
  int evictions = 4;          // loads per evicting phase, each evicting the other
  int rounds = 2;             // rotated evicting / idle rounds
  double idle_seconds = 3.0;  // the idle phase when it runs before any evicting one
};
// `evict`: status and inspect latency while large models are evicted and loaded in turn, against
// the same calls on an idle runtime. ratio = status p99 evicting / status p99 idle.
int run_evict(const evict_options& options);

struct policy_bench_options {
  std::uint64_t resident = 10000;     // models on the device
  double seconds = 1.0;               // per policy
  std::vector<std::string> policies;  // empty: every policy
};
// `policy`: eviction decisions per second of every policy with `resident` models.
int run_policy(const policy_bench_options& options);

struct cluster_options {
  int instances = 4;                            // warmd processes (at least 2)
  std::vector<std::uint64_t> layers{256, 256};  // every model's widths
  double seconds = 4.0;  // local / forwarded: total, split over rounds x 2 phases
  int clients = 4;       // closed-loop client threads per phase
  int rounds = 4;        // rotated local / forwarded rounds
  int cold = 50;         // cold models requested at once
  int lease_ttl = 3;     // the instances' --lease-ttl
  std::string warmd;     // default: warmd beside warm-bench
};
// `cluster`: etcd and `instances` warmd processes in one cluster. Forwarded against local
// inference (ratio = the median over rounds of forwarded_rps / local_rps), the largest share of
// `cold` models placed at once that one instance took (max_share), and the time from SIGKILL of
// the only instance holding a model to its first answer elsewhere (failover_s).
int run_cluster(const cluster_options& options);

// Percentile (0..100) of samples, which it sorts.
double percentile(std::vector<double>& samples, double pct);
inline double median(std::vector<double> samples) {
  return percentile(samples, 50);
}

// The order in which round `round` runs a paired benchmark's `phases` sides: the sides rotated by
// the round number, so that each side runs first equally often (a side that always runs first
// gets the cooler caches and the quieter scheduler, and the ratio would carry that bias).
template <typename T>
std::vector<T> rotated_order(std::vector<T> phases, int round) {
  if (!phases.empty()) {
    auto shift = static_cast<std::size_t>(round) % phases.size();
    std::rotate(phases.begin(), phases.begin() + static_cast<std::ptrdiff_t>(shift), phases.end());
  }
  return phases;
}

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& scenario)
      : path_(std::filesystem::temp_directory_path() /
              ("warm-bench-" + scenario + "-" + std::to_string(::getpid()))) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A runtime over `dir`/repo holding one registered dense model `id` with these layer widths, on a
// host device with room for it (at least 1 GiB). *model_path gets the model file's path;
// `batching` is the runtime's (off by default), `auto_batch` its automatic batching (none: the
// runtime's default).
expected<std::unique_ptr<runtime>> single_model_runtime(
    const scratch_dir& dir, const std::string& id, const std::vector<std::uint64_t>& layers,
    std::string* model_path = nullptr, const batching_options& batching = {},
    std::optional<std::uint64_t> auto_batch = std::nullopt);
// single_model_runtime with the model loaded (ensure_loaded, sync): every call on it is a hit.
expected<std::unique_ptr<runtime>> loaded_single_model_runtime(
    const scratch_dir& dir, const std::string& id, const std::vector<std::uint64_t>& layers,
    std::string* model_path = nullptr);

// One client thread's count in a timed phase of a throughput bench, on a cache line of its own
// (no false sharing between the threads that write them).
struct alignas(64) phase_tally {
  std::uint64_t calls = 0;     // answered as expected
  std::uint64_t failures = 0;  // anything else
  std::string failure;         // the first failure, for the report
  bool missed = false;         // a warm answer that should have been a cache hit was not
  std::vector<double> latencies_us;
  std::chrono::steady_clock::time_point end{};  // when the thread stopped; unset: at the deadline
};

// A phase's threads together.
struct phase_result {
  double rps = 0;
  std::uint64_t failures = 0;
  std::string failure;  // the first thread's first failure
  bool missed = false;
  std::vector<double> latencies_us;
};

// Sums the tallies of a phase that started at `start` and was to last `seconds`: requests per
// second over the time to the last thread's end (or over `seconds` when no thread set one).
phase_result merge_tallies(std::vector<phase_tally>& tallies,
                           std::chrono::steady_clock::time_point start, double seconds);

// An F32 input [1, width] of uniform values in [-1, 1).
tensor random_input(std::uint64_t width, std::uint64_t seed = 42);

// Counts completions that arrive on other threads; wait() returns once `expected` arrived, or
// false when `limit` passed first. Thread-safe.
class countdown {
 public:
  explicit countdown(std::uint64_t expected) : left_(expected) {}
  void arrive() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (left_ > 0 && --left_ == 0) done_.notify_all();
  }
  bool wait(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_.wait_for(lock, limit, [&] { return left_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::uint64_t left_;
};

}  // namespace warm::bench
