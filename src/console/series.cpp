#include "console/series.hpp"

#include <algorithm>
#include <cmath>

namespace warm::console {

reading read_instruments(const runtime_metrics& m, double unix_seconds, double monotonic_seconds) {
  reading r;
  r.unix_seconds = unix_seconds;
  r.monotonic_seconds = monotonic_seconds;
  r.hits = m.requests_hit.value();
  r.misses = m.requests_miss.value();
  r.errors = m.requests_error.value();
  r.loads = m.loads_started.value();
  r.load_failures = m.load_failures.value();
  for (const auto& d : m.devices)
    r.evictions += d.evictions[static_cast<int>(eviction_reason::capacity)].value();
  r.load_bytes = m.load_bytes.value();
  r.latency = m.request_seconds.read();
  return r;
}

namespace {

std::uint64_t grew(std::uint64_t before, std::uint64_t after) {
  return after > before ? after - before : 0;
}

}  // namespace

double quantile_between(const histogram::reading& before, const histogram::reading& after,
                        double q) {
  const auto& bounds = after.upper_bounds;
  if (bounds.empty() || after.cumulative.size() != bounds.size() ||
      before.cumulative.size() != bounds.size())
    return 0;
  const auto total = grew(before.count, after.count);
  if (total == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  std::uint64_t below = 0;  // observations in the buckets before bucket i
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    const auto upto = grew(before.cumulative[i], after.cumulative[i]);
    if (static_cast<double>(upto) >= rank && upto > below) {
      const double lower = i == 0 ? 0.0 : bounds[i - 1];
      const double in_bucket = static_cast<double>(upto - below);
      return lower + (bounds[i] - lower) * (rank - static_cast<double>(below)) / in_bucket;
    }
    below = std::max(below, upto);
  }
  return bounds.back();  // in the +Inf bucket
}

void series::add(const reading& r) {
  if (has_last_ && r.monotonic_seconds <= last_.monotonic_seconds) return;
  if (has_last_) {
    const double dt = r.monotonic_seconds - last_.monotonic_seconds;
    point p;
    p.t = static_cast<std::int64_t>(std::floor(r.unix_seconds));
    const auto hits = grew(last_.hits, r.hits), misses = grew(last_.misses, r.misses);
    p.requests_per_second = static_cast<double>(hits + misses + grew(last_.errors, r.errors)) / dt;
    p.hit_ratio =
        hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0;
    p.loads_per_second = static_cast<double>(grew(last_.loads, r.loads)) / dt;
    p.evictions_per_second = static_cast<double>(grew(last_.evictions, r.evictions)) / dt;
    p.load_bytes_per_second = static_cast<double>(grew(last_.load_bytes, r.load_bytes)) / dt;
    p.p50_ms = quantile_between(last_.latency, r.latency, 0.5) * 1e3;
    p.p99_ms = quantile_between(last_.latency, r.latency, 0.99) * 1e3;
    points_.push_back(p);
    while (points_.size() > capacity_)
      points_.pop_front();
  }
  last_ = r;
  has_last_ = true;
}

std::vector<point> series::after(double after) const {
  auto first = std::find_if(points_.begin(), points_.end(),
                            [after](const point& p) { return static_cast<double>(p.t) > after; });
  return {first, points_.end()};
}

}  // namespace warm::console
