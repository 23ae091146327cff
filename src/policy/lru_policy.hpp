// Least recently used: evicts the models whose last access is oldest until the new one fits.
// Sizes only decide how many victims are needed.
#pragma once

#include <list>
#include <unordered_map>

#include "policy/cache_policy.hpp"

namespace warm {

class lru_policy final : public cache_policy {
 public:
  std::string_view name() const override { return "lru"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return index_.size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

 private:
  struct entry {
    std::string model;
    std::uint64_t bytes;
    timestamp used;
  };
  std::list<entry> order_;  // most recent first
  std::unordered_map<std::string, std::list<entry>::iterator> index_;
};

}  // namespace warm
