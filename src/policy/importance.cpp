#include "policy/importance.hpp"

#include <algorithm>
#include <cmath>

namespace warm {

double utility(const score_input& in) {
  if (in.bytes == 0) return 0;
  return in.penalty_seconds / static_cast<double>(in.bytes) * in.rate;
}

double importance_heap::rank_of(double u, double bias) const {
  // #{j : u > u_j}: the heap is sorted by utility too (rank is monotone in it).
  auto below =
      std::lower_bound(entries.begin(), entries.end(), u,
                       [](const importance_entry& e, double value) { return e.utility < value; });
  return std::log(static_cast<double>(below - entries.begin()) + bias);
}

std::shared_ptr<const importance_heap> build_importance_heap(std::vector<score_input> inputs,
                                                             double bias, timestamp now) {
  auto heap = std::make_shared<importance_heap>();
  heap->built = now;
  heap->entries.reserve(inputs.size());
  for (auto& in : inputs)
    heap->entries.push_back({0, utility(in), std::move(in.model)});
  std::stable_sort(
      heap->entries.begin(), heap->entries.end(),
      [](const importance_entry& a, const importance_entry& b) { return a.utility < b.utility; });
  // Entries with equal utility share a count of strictly smaller ones.
  std::size_t smaller = 0;
  for (std::size_t i = 0; i < heap->entries.size(); ++i) {
    if (i > 0 && heap->entries[i].utility > heap->entries[i - 1].utility) smaller = i;
    heap->entries[i].rank = std::log(static_cast<double>(smaller) + bias);
  }
  return heap;
}

}  // namespace warm
