#include "policy/kdf_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace warm {

kdf_policy::kdf_policy(const policy_options& options)
    : tau_(options.kdf_tau.count()), horizon_(options.kdf_horizon) {}

double kdf_policy::decayed_count(const decayed& d, timestamp now) const {
  if (tau_ <= 0) return d.value;
  double dt = std::chrono::duration<double>(now - d.at).count();
  return dt <= 0 ? d.value : d.value * std::exp(-dt / tau_);
}

double kdf_policy::value_of(const resident& r, timestamp now) const {
  double n = decayed_count(*r.count, now);
  if (horizon_ > 0) n = 1 - std::exp(-n * horizon_);
  return n * r.info.penalty;
}

double kdf_policy::value(const std::string& model, timestamp now) const {
  auto r = residents_.find(model);
  return r == residents_.end() ? 0 : value_of(r->second, now);
}

std::vector<std::string> kdf_policy::knapsack(std::vector<candidate> cands, std::uint64_t bytes) {
  std::uint64_t available = 0;
  for (auto& c : cands) available += c.bytes;
  if (available < bytes) return {};
  // Lower value per byte first; ids break ties, so the hash maps' order never shows.
  auto denser = [](const candidate& a, const candidate& b) {
    double da = a.value / static_cast<double>(a.bytes), db = b.value / static_cast<double>(b.bytes);
    return da != db ? da > db : *a.model > *b.model;
  };
  std::vector<candidate> chosen;
  if (cands.size() <= exact_limit) {
    // Exact: the subset with the least value that frees enough; ties free fewer bytes.
    std::sort(cands.begin(), cands.end(), [&](const candidate& a, const candidate& b) { return denser(b, a); });
    double best_value = std::numeric_limits<double>::infinity();
    std::uint64_t best_bytes = 0;
    std::uint32_t best = 0;
    for (std::uint32_t set = 1; set < (1u << cands.size()); ++set) {
      std::uint64_t b = 0;
      double v = 0;
      for (std::size_t i = 0; i < cands.size(); ++i)
        if (set & (1u << i)) b += cands[i].bytes, v += cands[i].value;
      if (b < bytes) continue;
      if (v < best_value || (v == best_value && b < best_bytes)) best_value = v, best_bytes = b, best = set;
    }
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (best & (1u << i)) chosen.push_back(cands[i]);
  } else {
    // Greedy by value per byte (a heap: O(n + k log n) for k victims), then any single model
    // that frees enough alone for less value.
    std::vector<candidate> heap = cands;
    std::make_heap(heap.begin(), heap.end(), denser);
    double greedy_value = 0;
    std::uint64_t freed = 0;
    while (freed < bytes) {
      std::pop_heap(heap.begin(), heap.end(), denser);
      chosen.push_back(heap.back());
      heap.pop_back();
      freed += chosen.back().bytes;
      greedy_value += chosen.back().value;
    }
    for (auto& c : cands)
      if (c.bytes >= bytes && c.value < greedy_value) {
        greedy_value = c.value;
        chosen = {c};
      }
  }
  std::sort(chosen.begin(), chosen.end(), [](const candidate& a, const candidate& b) {
    return a.value != b.value ? a.value < b.value : *a.model < *b.model;
  });
  std::vector<std::string> victims;
  for (auto& c : chosen) victims.push_back(*c.model);
  return victims;
}

void kdf_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  auto& c = counts_[model];
  c.value = decayed_count(c, now) + static_cast<double>(count);
  c.at = std::max(c.at, now);
}

void kdf_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now) {
  residents_[model] = {{bytes, std::max(load_seconds, 1e-9)}, &counts_[model]};
  on_access(model, now, 1);  // the request that loaded it
}

void kdf_policy::on_remove(const std::string& model, bool) { residents_.erase(model); }

std::vector<std::string> kdf_policy::choose_victims(const std::string&, std::uint64_t bytes, const pinned_fn& pinned,
                                                    timestamp now) {
  std::vector<candidate> cands;
  cands.reserve(residents_.size());
  for (auto& [model, r] : residents_)
    if (!pinned(model)) cands.push_back({&model, r.info.bytes, value_of(r, now)});
  return knapsack(std::move(cands), bytes);
}

std::vector<cache_policy::ranked> kdf_policy::eviction_order(timestamp now) const {
  // Least value per byte first: the order kdf's greedy takes them in (its exact knapsack may
  // prefer a different set for a given number of bytes).
  std::vector<std::pair<double, ranked>> order;
  for (auto& [model, r] : residents_) {
    double v = value_of(r, now);
    order.push_back({v / static_cast<double>(r.info.bytes), {model, v}});
  }
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.model < b.second.model;
  });
  std::vector<ranked> out;
  for (auto& [density, r] : order) out.push_back(std::move(r));
  return out;
}

}  // namespace warm
