// Static re-reference interval prediction (Jaleel et al. 2010), 2-bit: every model carries a
// re-reference prediction value (RRPV) 0..3. A new model enters at 2 ("long"), a hit sets 0
// ("near"). A victim is a model at 3 ("distant"), the earliest inserted first; when none is,
// every unpinned model ages by one and the search repeats. Evicts until the new model fits; sizes
// only decide how many victims are needed. Aging done while choosing is kept, as in hardware.
#pragma once

#include <list>
#include <unordered_map>

#include "policy/cache_policy.hpp"

namespace warm {

class srrip_policy final : public cache_policy {
 public:
  static constexpr int distant = 3;
  static constexpr int long_interval = 2;

  std::string_view name() const override { return "srrip"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) override;
  void on_access(const std::string& model, timestamp, std::uint64_t) override;
  void on_remove(const std::string& model, bool) override;
  std::vector<std::string> choose_victims(const std::string&, std::uint64_t bytes, const pinned_fn& pinned,
                                          timestamp) override;
  std::size_t size() const override { return index_.size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

  int rrpv(const std::string& model) const;

 private:
  struct entry {
    std::string model;
    std::uint64_t bytes;
    int rrpv;
  };
  std::list<entry> order_;  // insertion order: the scan order
  std::unordered_map<std::string, std::list<entry>::iterator> index_;
};

}  // namespace warm
