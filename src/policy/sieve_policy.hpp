// SIEVE (Zhang et al., NSDI '24): a FIFO queue of residents, each with a "visited" bit set by a
// use, and a hand that sweeps from the oldest entry toward the newest. To make room the hand
// clears the bit of each visited model it passes and evicts the first unvisited one; it then
// stays where it stopped, so models that were used since the hand last passed survive one more
// round. New models enter at the newest end and are never moved by a use: the policy's state
// changes by one bit per hit.
//
// Sizes only decide how many victims are needed (as lru). Pinned models are passed over with
// their bit kept. choose_victims moves the hand and clears bits as it looks (as srrip ages), and
// answers nothing (changing nothing: the bits it cleared are set again) when the unpinned models
// cannot free enough. A decision looks at the models the hand passes, not at every resident.
#pragma once

#include <list>
#include <unordered_map>

#include "policy/cache_policy.hpp"

namespace warm {

class sieve_policy final : public cache_policy {
 public:
  std::string_view name() const override { return "sieve"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return index_.size(); }
  // The order the hand would evict in: from the hand toward the newest and around, unvisited
  // models first (score 0), then the visited ones (score 1) in the order a second round meets them.
  std::vector<ranked> eviction_order(timestamp now) const override;

 private:
  struct entry {
    std::string model;
    std::uint64_t bytes;
    bool visited = false;
  };
  using iterator = std::list<entry>::iterator;
  // Newest first: the hand moves from back() toward front(), then wraps to back().
  std::list<entry> queue_;
  std::unordered_map<std::string, iterator> index_;
  iterator hand_ = queue_.end();  // end(): start at the oldest
  std::uint64_t bytes_ = 0;       // of every resident

  // The entry after `it` in the hand's direction (toward the newest, wrapping to the oldest).
  iterator step(iterator it);
  std::list<entry>::const_iterator step(std::list<entry>::const_iterator it) const;
};

}  // namespace warm
