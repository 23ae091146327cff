#include "policy/lecar_policy.hpp"

#include <algorithm>
#include <cmath>

namespace warm {

void lecar_policy::set_capacity(std::uint64_t bytes) {
  capacity_ = bytes;
  for (auto& h : history_)
    trim(h);
}

void lecar_policy::forget(history& h, const std::string& model) {
  auto it = h.index.find(model);
  if (it == h.index.end()) return;
  h.bytes -= it->second->bytes;
  h.ghosts.erase(it->second);
  h.index.erase(it);
}

void lecar_policy::trim(history& h) {
  auto capacity = capacity_ ? capacity_ : peak_;
  while (!h.ghosts.empty() && h.bytes > capacity)
    forget(h, h.ghosts.back().model);
}

void lecar_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                             timestamp now) {
  on_remove(model, false);  // re-inserted while resident: start over
  // A request for a model an expert evicted: that expert's advice was wrong, the sooner the worse.
  auto n = static_cast<double>(std::max<std::size_t>(resident_bytes_.size(), 1));
  double discount = std::pow(discount_base, 1 / n);
  for (int e : {lru, lfu}) {
    auto it = history_[e].index.find(model);
    if (it == history_[e].index.end()) continue;
    double regret = std::pow(discount, static_cast<double>(time_ - it->second->evicted_at));
    weight_[e] *= std::exp(-learning_rate * regret);
    double sum = weight_[lru] + weight_[lfu];
    weight_[lru] /= sum;
    weight_[lfu] /= sum;
    forget(history_[e], model);
  }
  ++time_;
  resident_bytes_[model] = bytes;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  lru_.on_insert(model, bytes, load_seconds, now);
  lfu_.on_insert(model, bytes, load_seconds, now);
}

void lecar_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  if (!resident_bytes_.count(model)) return;
  time_ += count;
  lru_.on_access(model, now, count);
  lfu_.on_access(model, now, count);
}

void lecar_policy::on_remove(const std::string& model, bool evicted) {
  auto it = resident_bytes_.find(model);
  if (it == resident_bytes_.end()) return;
  auto bytes = it->second;
  used_ -= bytes;
  resident_bytes_.erase(it);
  lru_.on_remove(model, evicted);
  lfu_.on_remove(model, evicted);
  auto chose = chooser_.find(model);
  if (chose == chooser_.end()) return;
  int e = chose->second;
  chooser_.erase(chose);
  if (!evicted || e < 0) return;  // unregistered, or both experts chose it
  auto& h = history_[e];
  h.ghosts.push_front({model, bytes, time_});
  h.index[model] = h.ghosts.begin();
  h.bytes += bytes;
  trim(h);
}

std::vector<std::string> lecar_policy::choose_victims(const std::string& incoming,
                                                      std::uint64_t bytes, const pinned_fn& pinned,
                                                      timestamp now) {
  auto rng = rng_;  // drawn for real only if there is an answer
  double u = static_cast<double>(rng()) / 4294967296.0;
  int e = u < weight_[lru] ? lru : lfu;
  auto victims = expert(e).choose_victims(incoming, bytes, pinned, now);
  if (victims.empty()) return victims;
  rng_ = rng;
  chooser_.clear();  // victims of an earlier choice that were not evicted are forgotten
  auto other = expert(1 - e).choose_victims(incoming, bytes, pinned, now);
  for (auto& v : victims)
    chooser_[v] = std::find(other.begin(), other.end(), v) == other.end() ? e : -1;
  return victims;
}

std::vector<cache_policy::ranked> lecar_policy::eviction_order(timestamp now) const {
  return weight_[lfu] > weight_[lru] ? lfu_.eviction_order(now) : lru_.eviction_order(now);
}

}  // namespace warm
