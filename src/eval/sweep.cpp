#include "eval/sweep.hpp"

#include <optional>

#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace warm::eval {

unsigned sweep_threads(unsigned threads) {
  if (threads > 0) return threads;
  int n = tbb::info::default_concurrency();
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

std::vector<expected<sim_result>> run_sweep(const std::vector<sweep_cell>& cells,
                                            const policy_options& options, unsigned threads) {
  unsigned n = sweep_threads(threads);
  // expected<T> has no default constructor: each slot is filled exactly once, by its own index.
  std::vector<std::optional<expected<sim_result>>> slots(cells.size());
  auto run_one = [&](std::size_t i) {
    const sweep_cell& c = cells[i];
    slots[i].emplace(simulate(*c.requests, *c.models, c.capacity, c.policy, options));
  };
  if (n == 1) {
    for (std::size_t i = 0; i < cells.size(); ++i)
      run_one(i);
  } else {
    tbb::global_control cap(tbb::global_control::max_allowed_parallelism, n);
    tbb::task_arena arena(static_cast<int>(n));
    // Grain 1, simple partitioner: cells differ in cost by orders of magnitude (opt vs lru), so
    // every cell is its own task and idle threads steal the rest.
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, cells.size(), 1),
          [&](const tbb::blocked_range<std::size_t>& r) {
            for (std::size_t i = r.begin(); i != r.end(); ++i)
              run_one(i);
          },
          tbb::simple_partitioner());
    });
  }
  std::vector<expected<sim_result>> results;
  results.reserve(cells.size());
  for (auto& s : slots)
    results.push_back(std::move(*s));
  return results;
}

}  // namespace warm::eval
