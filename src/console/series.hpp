// The console's time series (docs/console.md): one point a second over the last minutes, each
// computed from two consecutive readings of the runtime's instruments. Pure logic: no clock, no
// thread; console::monitor takes the readings and keeps a series under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "warm/metrics.hpp"

namespace warm::console {

// One reading of the cumulative instruments, taken at `unix_seconds` (wall time, for the page)
// and `monotonic_seconds` (for the rates: wall time may step).
struct reading {
  double unix_seconds = 0;
  double monotonic_seconds = 0;
  std::uint64_t hits = 0, misses = 0, errors = 0;
  std::uint64_t loads = 0;          // load attempts started
  std::uint64_t load_failures = 0;  // load attempts that failed
  std::uint64_t evictions = 0;      // evictions for room, every device
  std::uint64_t load_bytes = 0;     // bytes successful loads installed
  histogram::reading latency;       // warm_request_seconds
};

// Reads the instruments now (relaxed loads; any thread).
reading read_instruments(const runtime_metrics& m, double unix_seconds, double monotonic_seconds);

// What happened between two readings, per second.
struct point {
  std::int64_t t = 0;              // unix seconds of the later reading, rounded down
  double requests_per_second = 0;  // hits, misses and errors
  double hit_ratio = 0;            // hits / (hits + misses); 0 with neither
  double loads_per_second = 0;
  double evictions_per_second = 0;
  double load_bytes_per_second = 0;
  double p50_ms = 0;  // of the requests answered with outputs between them; 0 with none
  double p99_ms = 0;
};

// Point `q` (0..1) of the observations between two readings of one histogram, interpolated
// linearly within its bucket as Prometheus' histogram_quantile does; an observation past the
// last bound counts as the last bound. 0 when nothing was observed between them.
double quantile_between(const histogram::reading& before, const histogram::reading& after,
                        double q);

// The points between consecutive readings, the newest `capacity` of them. A reading whose
// monotonic time does not move forward from the last one is ignored. Counters that went back
// (they never do in one runtime) count as no change.
class series {
 public:
  explicit series(std::size_t capacity = 900) : capacity_(capacity) {}

  void add(const reading& r);
  // Points with t > after, oldest first.
  std::vector<point> after(double after) const;
  std::size_t size() const { return points_.size(); }

 private:
  std::size_t capacity_;
  bool has_last_ = false;
  reading last_;
  std::deque<point> points_;
};

}  // namespace warm::console
