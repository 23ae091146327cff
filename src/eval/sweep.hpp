// A sweep: many independent policy simulations (policies × capacities × traces) run in parallel
// on a oneTBB arena. Each simulation is eval::simulate — the daemon's own policy code, single-
// threaded and deterministic — so a sweep's results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/simulator.hpp"

namespace warm::eval {

// One simulation of a sweep. `requests` and `models` are borrowed: they must outlive run_sweep
// and are only read (cells may share them).
struct sweep_cell {
  const trace* requests = nullptr;
  const catalog* models = nullptr;
  std::uint64_t capacity = 0;
  std::string policy;
};

// Runs simulate(*cell.requests, *cell.models, cell.capacity, cell.policy, options) for every
// cell, up to `threads` at a time (0 = all cores: oneTBB's default concurrency). Contract:
//  1. Result i is cell i's, whatever order the simulations finish in; a cell's error is its
//     result and does not stop the others. So the results equal a sequential loop's, for every
//     thread count.
//  2. The calling thread takes part and blocks until every cell is done. While it runs, the
//     process's oneTBB parallelism is capped at `threads` (a tbb::global_control), so a count
//     above the core count really gets that many threads (oneTBB's default is one fewer worker
//     than cores); callers must not run sweeps concurrently with other TBB work they need
//     uncapped.
std::vector<expected<sim_result>> run_sweep(const std::vector<sweep_cell>& cells,
                                            const policy_options& options, unsigned threads = 0);

// The thread count run_sweep uses for `threads` (0 → oneTBB's default concurrency).
unsigned sweep_threads(unsigned threads);

}  // namespace warm::eval
