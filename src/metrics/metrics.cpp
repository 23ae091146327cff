#include "warm/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "metrics/text_format.hpp"
#include "warm/device.hpp"
#include "warm/runtime_types.hpp"

namespace warm {

histogram::histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (std::size_t i = 0; i < bounds_.size(); ++i)
    if (!std::isfinite(bounds_[i]) || (i && bounds_[i] <= bounds_[i - 1]))
      throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
  buckets_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double value) noexcept {
  if (std::isnan(value)) return;
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);  // first bound >= value
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
}

histogram::reading histogram::read() const {
  reading r;
  r.upper_bounds = bounds_;
  r.cumulative.reserve(bounds_.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    r.cumulative.push_back(running);
  }
  r.count = running + buckets_[bounds_.size()].load(std::memory_order_relaxed);
  r.sum = sum_.load(std::memory_order_relaxed);
  return r;
}

std::vector<double> histogram::latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> histogram::batch_bounds() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
}

std::vector<double> histogram::lifetime_bounds() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400};
}

std::vector<double> histogram::rebuild_bounds() {
  return {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1};
}

const char* to_string(eviction_reason reason) noexcept {
  switch (reason) {
    case eviction_reason::capacity:
      return "capacity";
    case eviction_reason::unload:
      return "unload";
    case eviction_reason::replaced:
      return "replaced";
    case eviction_reason::lost:
      return "lost";
  }
  return "unknown";
}

runtime_metrics::runtime_metrics(std::size_t device_count) : devices(device_count) {}

namespace {

using prometheus::kind;
using prometheus::labels;

double as_double(std::uint64_t v) {
  return static_cast<double>(v);
}

void per_model(prometheus::text_writer& w, const std::vector<model_status>& models) {
  w.family("warm_model_requests_total", kind::counter,
           "Uses of the model (inferences and ensureLoaded), by outcome.");
  for (auto& m : models) {
    w.sample({{"model", m.id}, {"outcome", "hit"}}, as_double(m.hits));
    w.sample({{"model", m.id}, {"outcome", "miss"}}, as_double(m.requests - m.hits));
  }
  w.family("warm_model_loaded", kind::gauge, "1 while the model is loaded on a device, else 0.");
  for (auto& m : models)
    w.sample({{"model", m.id}}, m.state == model_state::loaded ? 1 : 0);
  w.family("warm_model_loads_total", kind::counter, "Successful loads of the model.");
  for (auto& m : models)
    w.sample({{"model", m.id}}, as_double(m.loads.count));
  w.family("warm_model_load_seconds_mean", kind::gauge,
           "Mean time of the model's successful loads.");
  for (auto& m : models)
    if (m.loads.count) w.sample({{"model", m.id}}, m.loads.mean_ms / 1e3);
  w.family("warm_model_requests_per_second", kind::gauge,
           "The model's request rate (60 s moving average).");
  for (auto& m : models)
    w.sample({{"model", m.id}}, m.requests_per_second);
}

}  // namespace

std::string prometheus_text(const runtime_metrics& m,
                            const std::vector<std::shared_ptr<device>>& devices,
                            const prometheus_options& options) {
  prometheus::text_writer w;
  w.family("warm_requests_total", kind::counter,
           "Inference requests by outcome: hit, miss (waited for a load), error.");
  w.sample({{"outcome", "hit"}}, as_double(m.requests_hit.value()));
  w.sample({{"outcome", "miss"}}, as_double(m.requests_miss.value()));
  w.sample({{"outcome", "error"}}, as_double(m.requests_error.value()));
  w.family("warm_request_seconds", kind::histogram,
           "Time from an inference's arrival to its answer (those answered with outputs).");
  w.histogram({}, m.request_seconds.read());
  w.family("warm_cache_miss_wait_seconds", kind::histogram,
           "How long an inference that missed waited for its model.");
  w.histogram({}, m.cache_miss_wait.read());
  w.family("warm_load_seconds", kind::histogram,
           "Duration of successful loads (read and copy to the device).");
  w.histogram({}, m.load_seconds.read());
  w.family("warm_load_queue_wait_seconds", kind::histogram,
           "Time a load spent queued before it started.");
  w.histogram({}, m.load_queue_wait.read());
  w.family("warm_batch_rows", kind::histogram,
           "Rows per batched pass over a model's weights (dynamic batching).");
  w.histogram({}, m.batch_rows.read());
  w.family("warm_batch_queue_delay_seconds", kind::histogram,
           "Time a request waited in its model's batch queue.");
  w.histogram({}, m.batch_queue_delay.read());
  w.family("warm_loads_started_total", kind::counter, "Load attempts started.");
  w.sample({}, as_double(m.loads_started.value()));
  w.family("warm_load_bytes_total", kind::counter,
           "Bytes of the models that successful loads installed on their devices.");
  w.sample({}, as_double(m.load_bytes.value()));
  w.family("warm_load_failures_total", kind::counter,
           "Load attempts that failed (each retry counts).");
  w.sample({}, as_double(m.load_failures.value()));
  w.family("warm_served_models", kind::gauge,
           "Models served from their directories, with versions.");
  w.sample({}, static_cast<double>(m.served_models.value()));
  w.family("warm_version_load_failures_total", kind::counter,
           "Loads of a served model's version that failed (each retry counts).");
  w.sample({}, as_double(m.version_load_failures.value()));
  w.family("warm_version_rolls_total", kind::counter,
           "Times a served model's name moved to another version.");
  w.sample({}, as_double(m.version_rolls.value()));
  w.family("warm_version_source_errors_total", kind::counter,
           "Looks at a served model's directory (an S3 listing) that failed; what serves stays.");
  w.sample({}, as_double(m.version_source_errors.value()));
  w.family("warm_tier_capacity_bytes", kind::gauge, "The disk tier's budget.");
  w.sample({}, static_cast<double>(m.tier_capacity_bytes.value()));
  w.family("warm_tier_used_bytes", kind::gauge,
           "Bytes of remote model files in the disk tier, and being written to it.");
  w.sample({}, static_cast<double>(m.tier_used_bytes.value()));
  w.family("warm_tier_files", kind::gauge, "Complete files in the disk tier.");
  w.sample({}, static_cast<double>(m.tier_files.value()));
  w.family("warm_tier_requests_total", kind::counter,
           "Requests for a local copy of a remote model file: hit (the tier held it) or miss "
           "(fetched).");
  w.sample({{"outcome", "hit"}}, as_double(m.tier_hits.value()));
  w.sample({{"outcome", "miss"}}, as_double(m.tier_misses.value()));
  w.family("warm_tier_evictions_total", kind::counter,
           "Files the disk tier removed to make room for another.");
  w.sample({}, as_double(m.tier_evictions.value()));
  w.family("warm_fetches_total", kind::counter,
           "Fetches of remote model files into the disk tier, by outcome.");
  w.sample({{"outcome", "ok"}}, as_double(m.fetches.value()));
  w.sample({{"outcome", "failed"}}, as_double(m.fetch_failures.value()));
  w.family("warm_fetch_bytes_total", kind::counter, "Bytes received by fetches.");
  w.sample({}, as_double(m.fetch_bytes.value()));
  w.family("warm_fetch_seconds", kind::histogram, "How long each successful fetch took.");
  w.histogram({}, m.fetch_seconds.read());
  w.family("warm_load_queue_length", kind::gauge, "Loads queued and not yet started.");
  w.sample({}, static_cast<double>(m.load_queue_length.value()));
  w.family("warm_loads_running", kind::gauge, "Loads reserving room or copying.");
  w.sample({}, static_cast<double>(m.loads_running.value()));
  w.family("warm_evictions_total", kind::counter,
           "Models removed from a device: capacity (room for a load), unload (operator or "
           "unregistration), replaced (a re-registered model's new copy).");
  for (std::size_t d = 0; d < m.devices.size() && d < devices.size(); ++d)
    for (int r = 0; r < eviction_reasons; ++r)
      w.sample(
          {{"device", devices[d]->name()}, {"reason", to_string(static_cast<eviction_reason>(r))}},
          as_double(m.devices[d].evictions[r].value()));
  w.family("warm_age_at_eviction_seconds", kind::histogram,
           "How long a model had been resident when it was evicted.");
  w.histogram({}, m.age_at_eviction.read());
  w.family("warm_device_capacity_bytes", kind::gauge, "Bytes the device may hold.");
  for (auto& dev : devices)
    w.sample({{"device", dev->name()}}, as_double(dev->capacity()));
  w.family("warm_device_used_bytes", kind::gauge,
           "Bytes charged on the device (resident, reserved and draining).");
  for (auto& dev : devices)
    w.sample({{"device", dev->name()}}, as_double(dev->used()));
  w.family("warm_models_loaded", kind::gauge, "Models resident on the device.");
  for (std::size_t d = 0; d < m.devices.size() && d < devices.size(); ++d)
    w.sample({{"device", devices[d]->name()}},
             static_cast<double>(m.devices[d].models_loaded.value()));
  w.family("warm_models_registered", kind::gauge, "Registered models.");
  w.sample({}, static_cast<double>(m.models_registered.value()));
  w.family("warm_vmodels_registered", kind::gauge, "Registered vmodels.");
  w.sample({}, static_cast<double>(m.vmodels_registered.value()));
  w.family("warm_importance_rebuild_seconds", kind::histogram,
           "Time to build one device's importance heap.");
  w.histogram({}, m.importance_rebuild.read());
  if (options.models) per_model(w, *options.models);
  return w.text();
}

}  // namespace warm
