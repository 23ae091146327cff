// Resident models ordered by a key, lowest first: the shared core of the policies that evict by a
// priority (LFU, GDSF, IAM's fresh inserts). Keys with equal value keep insertion order.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "policy/cache_policy.hpp"

namespace warm {

template <class Key>
class ranked_set {
 public:
  struct entry {
    Key key;
    std::uint64_t bytes = 0;
    std::uint64_t sequence = 0;  // tie-break: earlier (re)keyed first
  };

  bool contains(const std::string& model) const { return index_.count(model) != 0; }
  const entry* find(const std::string& model) const {
    auto it = index_.find(model);
    return it == index_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return index_.size(); }

  // Inserts or re-keys `model`. Re-keying moves it behind others with the same key.
  void set(const std::string& model, Key key, std::uint64_t bytes) {
    erase(model);
    entry e{key, bytes, ++sequence_};
    order_.insert({e.key, e.sequence, model});
    index_.emplace(model, e);
  }

  void erase(const std::string& model) {
    auto it = index_.find(model);
    if (it == index_.end()) return;
    order_.erase({it->second.key, it->second.sequence, model});
    index_.erase(it);
  }

  // The lowest-keyed unpinned models whose bytes reach `bytes`; empty if they cannot.
  std::vector<std::string> lowest(std::uint64_t bytes, const pinned_fn& pinned) const {
    std::vector<std::string> victims;
    std::uint64_t freed = 0;
    for (auto it = order_.begin(); it != order_.end() && freed < bytes; ++it) {
      const auto& model = std::get<2>(*it);
      if (pinned(model)) continue;
      victims.push_back(model);
      freed += index_.at(model).bytes;
    }
    if (freed < bytes) victims.clear();
    return victims;
  }

  // Walks the models lowest key first without copying them: `begin()` to `end()`, reading each
  // position with model_at / key_at. Positions are invalidated by set and erase.
  using position = typename std::set<std::tuple<Key, std::uint64_t, std::string>>::const_iterator;
  position begin() const { return order_.begin(); }
  position end() const { return order_.end(); }
  static const std::string& model_at(position p) { return std::get<2>(*p); }
  static const Key& key_at(position p) { return std::get<0>(*p); }

  // Every (model, key), lowest key first.
  std::vector<std::pair<std::string, Key>> entries() const {
    std::vector<std::pair<std::string, Key>> out;
    for (auto& o : order_)
      out.push_back({std::get<2>(o), std::get<0>(o)});
    return out;
  }

  // Every model, lowest key first (for tests and inspection).
  std::vector<std::string> in_order() const {
    std::vector<std::string> out;
    for (auto& o : order_)
      out.push_back(std::get<2>(o));
    return out;
  }

 private:
  std::set<std::tuple<Key, std::uint64_t, std::string>> order_;
  std::unordered_map<std::string, entry> index_;
  std::uint64_t sequence_ = 0;
};

}  // namespace warm
