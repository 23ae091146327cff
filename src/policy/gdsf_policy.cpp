#include "policy/gdsf_policy.hpp"

#include <algorithm>

namespace warm {

void gdsf_policy::rekey(const std::string& model) {
  auto& s = stats_.at(model);
  auto bytes = models_.find(model) ? models_.find(model)->bytes : 0;
  models_.set(model, inflation_ + static_cast<double>(s.frequency) * s.cost_per_byte, bytes);
}

void gdsf_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                            timestamp) {
  // A tiny positive cost keeps zero-cost loads ordered by frequency and age.
  double cost = std::max(load_seconds, 1e-9);
  stats_[model] = {
      1, cost / static_cast<double>(std::max<std::uint64_t>(bytes, 1))};  // frequency 1: the load
  models_.set(model, inflation_, bytes);
  rekey(model);
}

void gdsf_policy::on_access(const std::string& model, timestamp, std::uint64_t count) {
  auto it = stats_.find(model);
  if (it == stats_.end()) return;
  it->second.frequency += count;
  rekey(model);
}

void gdsf_policy::on_remove(const std::string& model, bool evicted) {
  if (evicted)
    if (auto* e = models_.find(model)) inflation_ = std::max(inflation_, e->key);
  models_.erase(model);
  stats_.erase(model);
}

}  // namespace warm
