// warm's operational metrics: lock-free counters, gauges and histograms that the runtime's actors
// and its hit path update as they work, and the Prometheus text exposition of them
// (docs/metrics.md lists every metric and what moves it).
//
//   auto text = warm::prometheus_text(rt->metrics(), rt->devices());
//
// Instruments are updated with relaxed atomics from any thread; nothing on the hit path takes a
// lock or sends a message to count. A reading is a snapshot per instrument, not across them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace warm {

class device;
struct model_status;

// A count that only goes up.
class counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down (set by its owner, or adjusted).
class gauge {
 public:
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(std::int64_t delta) noexcept { value_.fetch_add(delta, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// Observations counted into fixed buckets by upper bound (Prometheus's `le`), plus their sum.
// observe() is one bucket increment and a compare-and-swap on the sum. A reading's count is the
// sum of its buckets, so `_count` always equals the `+Inf` bucket, as the format requires.
class histogram {
 public:
  // upper_bounds: finite and strictly increasing (the +Inf bucket is implicit). Throws
  // std::invalid_argument otherwise: the bounds are the program's constants, not input.
  explicit histogram(std::vector<double> upper_bounds);

  void observe(double value) noexcept;  // NaN is ignored

  struct reading {
    std::vector<double> upper_bounds;
    std::vector<std::uint64_t> cumulative;  // per bound, observations <= it
    std::uint64_t count = 0;                // all observations (the +Inf bucket)
    double sum = 0;
  };
  reading read() const;

  // Bucket sets used by warm: request waits and load times (0.5 ms .. 60 s), model lifetimes
  // (1 s .. 1 day), importance rebuilds (10 µs .. 1 s).
  static std::vector<double> latency_bounds();
  static std::vector<double> lifetime_bounds();
  static std::vector<double> rebuild_bounds();
  static std::vector<double> batch_bounds();  // rows: 1, 2, 4, … 4096

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1, the last is +Inf
  std::atomic<double> sum_{0};
};

// Why a model left a device.
// capacity: for room; unload: an operator or unregistration; replaced: by a newer registration's
// copy; lost: the device's process died (a model runtime), taking the model with it.
enum class eviction_reason { capacity, unload, replaced, lost };
inline constexpr int eviction_reasons = 4;
const char* to_string(eviction_reason reason) noexcept;

// What one device actor keeps current.
struct device_metrics {
  gauge models_loaded;                  // resident models (draining ones excluded)
  counter evictions[eviction_reasons];  // by eviction_reason
};

// Every instrument of one runtime. Owned by the runtime; the actors hold it by shared_ptr.
struct runtime_metrics {
  explicit runtime_metrics(std::size_t device_count);

  // Inference requests by outcome: a hit ran on a loaded model, a miss waited for a load,
  // an error was answered with one (bad input, unknown model, failed load).
  counter requests_hit, requests_miss, requests_error;
  // Seconds from an inference's arrival to its answer, for those answered with outputs (hits and
  // misses alike; a miss's load wait included), by the runtime's clock.
  histogram request_seconds{histogram::latency_bounds()};
  histogram cache_miss_wait{histogram::latency_bounds()};  // seconds a miss waited for its model
  histogram load_seconds{histogram::latency_bounds()};     // successful loads: read + copy
  histogram load_queue_wait{histogram::latency_bounds()};  // enqueue (or requeue) → load start
  histogram batch_rows{histogram::batch_bounds()};  // rows per batched pass (dynamic batching)
  histogram batch_queue_delay{
      histogram::latency_bounds()};  // seconds a request queued for its pass
  counter loads_started;
  counter load_failures;  // failed load attempts
  counter load_bytes;     // bytes of the models successful loads installed
  histogram age_at_eviction{histogram::lifetime_bounds()};  // seconds resident, at eviction
  histogram importance_rebuild{histogram::rebuild_bounds()};
  gauge load_queue_length;  // loads queued, not yet started
  gauge loads_running;      // reserving or loading
  gauge models_registered;
  gauge vmodels_registered;
  // Served models (warm/versions.hpp): their number, failed version loads, versions that became
  // a model's default, looks at a model's directory that failed (unreadable, or its S3 listing
  // refused or unanswered: what serves stays).
  gauge served_models;
  counter version_load_failures;
  counter version_rolls;
  counter version_source_errors;
  // Remote sources (docs/storage.md): the disk tier's budget, bytes and files (set by its actor),
  // its hits (a copy it held), misses (fetched), evictions; fetches of remote files by outcome,
  // the bytes received and how long each successful fetch took.
  gauge tier_capacity_bytes, tier_used_bytes, tier_files;
  counter tier_hits, tier_misses, tier_evictions;
  counter fetches, fetch_failures, fetch_bytes;
  histogram fetch_seconds{histogram::latency_bounds()};
  std::vector<device_metrics> devices;  // in the runtime's device order
};

struct prometheus_options {
  // Per-model series (warm_model_*{model="…"}) from these statuses; none when empty. Off by
  // default in warmd: one series per model is a cardinality an operator must ask for.
  const std::vector<model_status>* models = nullptr;
};

// The Prometheus text exposition (format 0.0.4) of `m`; `devices` in the same order as m.devices.
std::string prometheus_text(const runtime_metrics& m,
                            const std::vector<std::shared_ptr<device>>& devices,
                            const prometheus_options& options = {});

}  // namespace warm
