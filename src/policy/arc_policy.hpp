// Adaptive replacement cache (Megiddo & Modha 2003), measured in bytes instead of pages.
//
// T1 holds models seen once since they were loaded, T2 models seen again; B1 and B2 remember
// (as ghosts: id and size, no memory) models recently evicted from T1 and T2. The target p is the
// bytes T1 should hold. Adaptation to variable sizes:
//  - a load of a model found in B1 raises p by max(1, bytes(B2)/bytes(B1)) × its size (capped at
//    the capacity c); one found in B2 lowers p by max(1, bytes(B1)/bytes(B2)) × its size — the
//    page-count rule with each step weighted by the bytes that were missed;
//  - replacement takes the LRU end of T1 while T1 holds more than p bytes (the `incoming` model
//    being a B2 ghost makes "T1 holds exactly p" count too, as in the original), else of T2, and
//    repeats until the bytes asked for are free; a pinned model is skipped for the next one in
//    its list, and a list with nothing evictable yields to the other;
//  - ghosts are trimmed by bytes: bytes(T1) + bytes(B1) ≤ c and the four lists ≤ 2c.
// choose_victims uses the p that the incoming model's load would set; on_insert commits it.
#pragma once

#include <algorithm>
#include <list>
#include <unordered_map>

#include "policy/cache_policy.hpp"

namespace warm {

class arc_policy final : public cache_policy {
 public:
  explicit arc_policy(std::uint64_t capacity) : capacity_(capacity) {}

  std::string_view name() const override { return "arc"; }
  void set_capacity(std::uint64_t bytes) override {
    capacity_ = bytes;
    p_ = std::min(p_, static_cast<double>(bytes));  // the target for T1 stays within the cache
  }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return lists_[t1].size() + lists_[t2].size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

  enum list_id { t1, t2, b1, b2 };
  // Which list holds `model`, or -1.
  int where(const std::string& model) const;
  double target() const { return p_; }
  std::uint64_t bytes_in(list_id l) const { return bytes_[l]; }

 private:
  struct entry {
    std::string model;
    std::uint64_t bytes;
  };
  using list = std::list<entry>;  // most recent first
  struct position {
    list_id in;
    list::iterator at;
  };

  void push(list_id l, const std::string& model, std::uint64_t bytes);
  void erase(const std::string& model);
  void trim_ghosts();
  double adapted_target(const std::string& incoming, std::uint64_t bytes) const;

  std::uint64_t capacity_;
  double p_ = 0;
  list lists_[4];
  std::uint64_t bytes_[4] = {0, 0, 0, 0};
  std::unordered_map<std::string, position> index_;
};

}  // namespace warm
