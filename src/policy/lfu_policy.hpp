// Least frequently used: evicts the models with the fewest requests since they were (re)loaded;
// ties go to the least recently used. Sizes only decide how many victims are needed.
#pragma once

#include <utility>

#include "policy/ranked_set.hpp"

namespace warm {

class lfu_policy final : public cache_policy {
 public:
  std::string_view name() const override { return "lfu"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) override {
    models_.set(model, {1, ++clock_}, bytes);  // the request that loaded it
  }
  void on_access(const std::string& model, timestamp, std::uint64_t count) override {
    if (auto* e = models_.find(model))
      models_.set(model, {e->key.first + count, ++clock_}, e->bytes);
  }
  void on_remove(const std::string& model, bool) override { models_.erase(model); }
  std::vector<std::string> choose_victims(const std::string&, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp) override {
    return models_.lowest(bytes, pinned);
  }
  std::size_t size() const override { return models_.size(); }
  std::vector<ranked> eviction_order(timestamp) const override {
    std::vector<ranked> out;
    for (auto& [model, key] : models_.entries())
      out.push_back({model, static_cast<double>(key.first)});
    return out;
  }

 private:
  ranked_set<std::pair<std::uint64_t, std::uint64_t>> models_;  // (requests, last access tick)
  std::uint64_t clock_ = 0;
};

}  // namespace warm
