// warm-bench scenarios. Each prints one JSON object per run on stdout and compares against a
// baseline measured in the same run (a ratio), because shared machines are noisy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace warm::bench {

struct load_options {
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
};
// `exec`: direct executor throughput and latency for a small model on the host device.
int run_exec(const exec_options& options);

// Percentile (0..100) of samples, which it sorts.
double percentile(std::vector<double>& samples, double pct);

}  // namespace warm::bench
