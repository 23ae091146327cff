#include "policy/kdf_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace warm {

kdf_policy::kdf_policy(const policy_options& options)
    : tau_(options.kdf_tau.count()), horizon_(options.kdf_horizon) {}

double kdf_policy::decayed_count(const std::string& model, timestamp now) const {
  auto c = counts_.find(model);
  if (c == counts_.end()) return 0;
  if (tau_ <= 0) return c->second.value;
  double dt = std::chrono::duration<double>(now - c->second.at).count();
  return dt <= 0 ? c->second.value : c->second.value * std::exp(-dt / tau_);
}

double kdf_policy::value(const std::string& model, timestamp now) const {
  auto m = residents_.find(model);
  if (m == residents_.end()) return 0;
  double n = decayed_count(model, now);
  if (horizon_ > 0) n = 1 - std::exp(-n * horizon_);
  return n * m->second.penalty;
}

std::vector<std::string> kdf_policy::knapsack(std::vector<candidate> cands, std::uint64_t bytes) {
  std::uint64_t available = 0;
  for (auto& c : cands) available += c.bytes;
  if (available < bytes) return {};
  // A deterministic order whatever the hash maps did: by value per byte, then id.
  std::sort(cands.begin(), cands.end(), [](const candidate& a, const candidate& b) {
    double da = a.value / static_cast<double>(a.bytes), db = b.value / static_cast<double>(b.bytes);
    return da != db ? da < db : *a.model < *b.model;
  });
  std::vector<std::size_t> chosen;
  if (cands.size() <= 16) {
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
      if (best & (1u << i)) chosen.push_back(i);
  } else {
    double greedy_value = 0;
    std::uint64_t freed = 0;
    for (std::size_t i = 0; i < cands.size() && freed < bytes; ++i) {
      chosen.push_back(i);
      freed += cands[i].bytes;
      greedy_value += cands[i].value;
    }
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (cands[i].bytes >= bytes && cands[i].value < greedy_value) {
        greedy_value = cands[i].value;
        chosen = {i};
      }
  }
  std::sort(chosen.begin(), chosen.end(), [&](std::size_t a, std::size_t b) { return cands[a].value < cands[b].value; });
  std::vector<std::string> victims;
  for (auto i : chosen) victims.push_back(*cands[i].model);
  return victims;
}

void kdf_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  auto& c = counts_[model];
  c.value = decayed_count(model, now) + static_cast<double>(count);
  c.at = std::max(c.at, now);
}

void kdf_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now) {
  residents_[model] = {bytes, std::max(load_seconds, 1e-9)};
  on_access(model, now, 1);  // the request that loaded it
}

void kdf_policy::on_remove(const std::string& model, bool) { residents_.erase(model); }

std::vector<std::string> kdf_policy::choose_victims(const std::string&, std::uint64_t bytes, const pinned_fn& pinned,
                                                    timestamp now) {
  std::vector<candidate> cands;
  for (auto& [model, info] : residents_)
    if (!pinned(model)) cands.push_back({&model, info.bytes, value(model, now)});
  return knapsack(std::move(cands), bytes);
}

}  // namespace warm
