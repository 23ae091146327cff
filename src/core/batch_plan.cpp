#include "core/batch_plan.hpp"

#include <algorithm>
#include <string>

namespace warm {

std::size_t requests_to_run(const std::vector<std::uint64_t>& rows,
                            std::chrono::microseconds waited, const batching_options& options) {
  if (rows.empty()) return 0;
  if (!options.enabled() || rows.front() >= options.max_batch) return 1;
  // The candidate: the longest prefix within max_batch; `ends[k]` = rows of the first k+1.
  std::vector<std::uint64_t> ends;
  std::uint64_t sum = 0;
  for (auto r : rows) {
    if (r > options.max_batch - sum) break;
    sum += r;
    ends.push_back(sum);
  }
  const bool full = sum == options.max_batch || ends.size() < rows.size();
  if (full) return ends.size();

  // The longest prefix whose rows are a preferred size, and whether that size is the largest
  // one the queue could reach (no larger preferred size fits max_batch beside what is queued).
  std::size_t preferred_prefix = 0;
  std::uint64_t preferred_rows = 0;
  for (std::size_t k = 0; k < ends.size(); ++k)
    if (std::find(options.preferred_batch.begin(), options.preferred_batch.end(), ends[k]) !=
        options.preferred_batch.end()) {
      preferred_prefix = k + 1;
      preferred_rows = ends[k];
    }
  if (preferred_prefix > 0) {
    auto largest =
        *std::max_element(options.preferred_batch.begin(), options.preferred_batch.end());
    if (preferred_rows == largest) return preferred_prefix;
  }
  if (waited < options.max_queue_delay) return 0;
  return preferred_prefix > 0 ? preferred_prefix : ends.size();
}

std::size_t fair_share(const std::vector<std::uint64_t>& rows, std::size_t planned,
                       std::uint64_t queued_rows, std::uint64_t running_rows, unsigned passes,
                       const batching_options& options) {
  if (passes <= 1 || planned <= 1 || options.max_queue_delay.count() != 0 ||
      !options.preferred_batch.empty())
    return planned;
  const auto total = queued_rows + running_rows;
  const auto share = total / passes + (total % passes != 0);
  std::size_t n = 1;
  std::uint64_t sum = rows.front();
  while (n < planned && n < rows.size() && sum + rows[n] <= share)
    sum += rows[n++];
  return n;
}

std::string check_batching(const batching_options& options) {
  if (!options.enabled()) return {};
  if (options.preferred_batch.size() > max_preferred_sizes)
    return "at most " + std::to_string(max_preferred_sizes) + " preferred batch sizes";
  for (auto p : options.preferred_batch)
    if (p == 0 || p > options.max_batch)
      return "preferred batch size " + std::to_string(p) + " is outside 1.." +
             std::to_string(options.max_batch);
  if (options.max_batch > max_batch_limit)
    return "max_batch is over " + std::to_string(max_batch_limit);
  if (options.max_queue == 0) return "max_queue must be positive";
  if (options.max_queue > max_queue_limit)
    return "max_queue is over " + std::to_string(max_queue_limit);
  if (options.max_queue_delay.count() < 0) return "max_queue_delay must not be negative";
  if (options.max_queue_delay > max_queue_delay_limit)
    return "max_queue_delay is over " + std::to_string(max_queue_delay_limit.count()) + " us";
  return {};
}

}  // namespace warm
