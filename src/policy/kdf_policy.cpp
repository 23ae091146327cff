#include "policy/kdf_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace warm {

kdf_policy::kdf_policy(const policy_options& options)
    : capacity_(options.capacity), window_(options.kdf_window.count()) {
  if (options.kdf_tau.count() > 0 || options.kdf_horizon > 0 || capacity_ == 0) {
    // Fixed parameters (or no capacity to size shadow caches by): one expert.
    experts_.push_back({options.kdf_tau.count(), options.kdf_horizon, {}, {}, 0, {}});
    return;
  }
  for (double tau : {300.0, 1200.0, 0.0})
    for (double horizon : {0.0, 0.2}) experts_.push_back({tau, horizon, {}, {}, 0, {}});
}

double kdf_policy::decay(const decayed& d, timestamp now, double tau) {
  if (tau <= 0) return d.value;
  double dt = std::chrono::duration<double>(now - d.at).count();
  return dt <= 0 ? d.value : d.value * std::exp(-dt / tau);
}

double kdf_policy::value(const expert& e, const std::string& model, timestamp now) const {
  auto c = e.counts.find(model);
  auto m = known_.find(model);
  if (c == e.counts.end() || m == known_.end()) return 0;
  double n = decay(c->second, now, e.tau);
  if (e.horizon > 0) n = 1 - std::exp(-n * e.horizon);
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

// Every request reaches every expert: its counts, and its shadow cache (a shadow miss costs the
// expert the model's load time and evicts by the expert's own values).
void kdf_policy::request(const std::string& model, timestamp now, std::uint64_t count) {
  const auto& info = known_.at(model);
  for (auto& e : experts_) {
    auto& c = e.counts[model];
    c.value = decay(c, now, e.tau) + static_cast<double>(count);
    c.at = std::max(c.at, now);
    if (experts_.size() == 1 || e.shadow.count(model)) continue;
    e.cost.value = decay(e.cost, now, window_) + info.penalty;
    e.cost.at = std::max(e.cost.at, now);
    if (e.shadow_bytes + info.bytes > capacity_) {
      std::vector<candidate> cands;
      for (auto& m : e.shadow) cands.push_back({&m, known_.at(m).bytes, value(e, m, now)});
      for (auto& victim : knapsack(std::move(cands), e.shadow_bytes + info.bytes - capacity_)) {
        e.shadow_bytes -= known_.at(victim).bytes;
        e.shadow.erase(victim);
      }
    }
    if (e.shadow_bytes + info.bytes <= capacity_) {
      e.shadow.insert(model);
      e.shadow_bytes += info.bytes;
    }
  }
}

void kdf_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now) {
  model_info info{bytes, std::max(load_seconds, 1e-9)};
  known_[model] = info;
  residents_[model] = info;
  request(model, now, 1);  // the request that loaded it
}

void kdf_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  if (known_.count(model)) request(model, now, count);
}

void kdf_policy::on_remove(const std::string& model, bool) { residents_.erase(model); }

std::pair<double, double> kdf_policy::leader() const {
  const expert* best = &experts_.front();
  for (auto& e : experts_)
    if (e.cost.value < best->cost.value) best = &e;  // costs decay alike: compare at their own times
  return {best->tau, best->horizon};
}

std::vector<std::string> kdf_policy::choose_victims(const std::string&, std::uint64_t bytes, const pinned_fn& pinned,
                                                    timestamp now) {
  const expert* best = &experts_.front();
  for (auto& e : experts_)
    if (decay(e.cost, now, window_) < decay(best->cost, now, window_)) best = &e;
  std::vector<candidate> cands;
  for (auto& [model, info] : residents_)
    if (!pinned(model)) cands.push_back({&model, info.bytes, value(*best, model, now)});
  return knapsack(std::move(cands), bytes);
}

}  // namespace warm
