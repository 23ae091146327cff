// GreedyDual-Size-Frequency (Cherkasova 1998): priority H = L + frequency × penalty / size.
// Evicts the lowest H; the inflation value L rises to the H of each evicted model, so models
// that stop being used age out relative to newly (re)loaded ones. Size enters directly: a large
// model must be requested proportionally more, or be proportionally slower to load, to stay.
#pragma once

#include <unordered_map>

#include "policy/ranked_set.hpp"

namespace warm {

class gdsf_policy final : public cache_policy {
 public:
  std::string_view name() const override { return "gdsf"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp) override;
  void on_access(const std::string& model, timestamp, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string&, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp) override {
    return models_.lowest(bytes, pinned);
  }
  std::size_t size() const override { return models_.size(); }
  std::vector<ranked> eviction_order(timestamp) const override {
    std::vector<ranked> out;
    for (auto& [model, key] : models_.entries())
      out.push_back({model, key});
    return out;
  }

  double inflation() const { return inflation_; }
  double priority(const std::string& model) const {
    auto* e = models_.find(model);
    return e ? e->key : 0;
  }

 private:
  struct stats {
    std::uint64_t frequency = 0;
    double cost_per_byte = 0;  // load seconds per byte
  };
  void rekey(const std::string& model);

  ranked_set<double> models_;
  std::unordered_map<std::string, stats> stats_;
  double inflation_ = 0;  // L
};

}  // namespace warm
