// Static re-reference interval prediction (Jaleel et al. 2010), 2-bit: every model carries a
// re-reference prediction value (RRPV) 0..3. A new model enters at 2 ("long"), a hit sets 0
// ("near"). A victim is a model at 3 ("distant"), the earliest inserted first; when none is,
// every unpinned model ages by one and the search repeats. Evicts until the new model fits; sizes
// only decide how many victims are needed. Aging done while choosing is kept, as in hardware.
//
// Cost: the distant models are kept apart, ordered by insertion, so a choice looks only at them
// (the pinned ones among them and the victims); a round of aging visits the models below 3, each
// unpinned one gaining a step it can gain at most three times per insert or hit — amortized O(1)
// per reference, plus the pinned models passed over. Whether the unpinned models can free enough
// is known only when every one of them has been looked at: a choice that fails undoes its aging.
#pragma once

#include <map>
#include <unordered_map>
#include <vector>

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
  std::vector<std::string> choose_victims(const std::string&, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp) override;
  std::size_t size() const override { return index_.size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

  int rrpv(const std::string& model) const;

 private:
  struct entry {
    const std::string* model;  // the key in index_
    std::uint64_t bytes;
    std::uint64_t seq;  // insertion order: the scan order
    int rrpv;
    std::size_t slot = 0;  // its place in near_ while rrpv < distant
  };
  void make_near(entry& e);     // from distant_ (or nowhere) into near_
  void make_distant(entry& e);  // from near_ into distant_
  void leave_near(entry& e);

  std::unordered_map<std::string, entry> index_;
  std::vector<entry*> near_;                 // rrpv < distant, in no particular order
  std::map<std::uint64_t, entry*> distant_;  // rrpv == distant, by insertion
  std::uint64_t next_seq_ = 0;
  std::uint64_t bytes_ = 0;  // every resident's
};

}  // namespace warm
