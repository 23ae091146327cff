#include "eval/simulator.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "eval/support.hpp"
#include "policy/cache_policy.hpp"

namespace warm::eval {
namespace {

// The requests as catalog indices, checked: every model known and able to fit.
expected<std::vector<std::size_t>> resolve(const trace& requests, const catalog& models,
                                           std::uint64_t capacity) {
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < models.size(); ++i)
    index.emplace(models[i].model, i);
  std::vector<std::size_t> out;
  out.reserve(requests.size());
  for (auto& r : requests) {
    auto it = index.find(r.model);
    if (it == index.end())
      return make_error(errc::invalid_argument, "model '" + r.model + "' is not in the catalog");
    if (models[it->second].bytes > capacity)
      return make_error(errc::invalid_argument,
                        "model '" + r.model + "' (" + std::to_string(models[it->second].bytes) +
                            " bytes) is larger than the capacity of " + std::to_string(capacity));
    out.push_back(it->second);
  }
  return out;
}

void finish(sim_result& r, const trace& requests, const catalog& models,
            const std::vector<std::size_t>& ids, double bytes_missed) {
  r.requests = requests.size();
  r.hits = r.requests - r.misses;
  r.hit_ratio = r.requests ? static_cast<double>(r.hits) / static_cast<double>(r.requests) : 0;
  double bytes_requested = 0;
  for (auto i : ids)
    bytes_requested += static_cast<double>(models[i].bytes);
  r.byte_miss_ratio = bytes_requested > 0 ? bytes_missed / bytes_requested : 0;
  r.load_ms_per_request = r.requests ? r.load_ms_total / static_cast<double>(r.requests) : 0;
}

expected<sim_result> run_online(const trace& requests, const catalog& models,
                                const std::vector<std::size_t>& ids, std::uint64_t capacity,
                                const std::string& name, policy_options options) {
  options.capacity = capacity;
  auto made = make_policy(name, options);
  if (!made) return std::move(made).error();
  auto& policy = **made;
  sim_result r;
  r.policy = name;
  r.capacity_bytes = capacity;
  std::vector<bool> resident(models.size(), false);
  std::uint64_t used = 0;
  double bytes_missed = 0;
  auto unpinned = [](const std::string&) { return false; };
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < models.size(); ++i)
    index.emplace(models[i].model, i);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto i = ids[k];
    auto now = detail::at_ms(requests[k].time_ms);
    const auto& m = models[i];
    if (resident[i]) {
      policy.on_access(m.model, now, 1);
      continue;
    }
    ++r.misses;
    r.load_ms_total += m.load_ms;
    bytes_missed += static_cast<double>(m.bytes);
    if (used + m.bytes > capacity) {
      auto victims = policy.choose_victims(m.model, used + m.bytes - capacity, unpinned, now);
      if (victims.empty())
        return make_error(errc::internal, name + " found no victims for " + m.model);
      for (auto& v : victims) {
        auto vi = index.at(v);
        if (!resident[vi])
          return make_error(errc::internal, name + " chose " + v + ", which is not resident");
        policy.on_remove(v, true);
        resident[vi] = false;
        used -= models[vi].bytes;
        ++r.evictions;
      }
    }
    policy.on_insert(m.model, m.bytes, m.load_ms / 1000, now);
    resident[i] = true;
    used += m.bytes;
  }
  finish(r, requests, models, ids, bytes_missed);
  return r;
}

// Size-aware Belady: on a miss, evict the resident model with the largest
// (requests until its next use) × bytes until the newcomer fits. Needs the future: offline only.
sim_result run_belady_size(const trace& requests, const catalog& models,
                           const std::vector<std::size_t>& ids, std::uint64_t capacity) {
  const auto never = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> next_use(ids.size(), never);
  std::vector<std::size_t> seen(models.size(), never);
  for (std::size_t k = ids.size(); k-- > 0;) {
    next_use[k] = seen[ids[k]];
    seen[ids[k]] = k;
  }
  sim_result r;
  r.policy = "belady-size";
  r.capacity_bytes = capacity;
  std::vector<std::size_t> next_of(models.size(), never);  // for resident models
  std::vector<bool> resident(models.size(), false);
  std::uint64_t used = 0;
  double bytes_missed = 0;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto i = ids[k];
    next_of[i] = next_use[k];
    if (resident[i]) continue;
    ++r.misses;
    r.load_ms_total += models[i].load_ms;
    bytes_missed += static_cast<double>(models[i].bytes);
    while (used + models[i].bytes > capacity) {
      std::size_t victim = never;
      double worst = -1;
      for (std::size_t j = 0; j < models.size(); ++j) {
        if (!resident[j]) continue;
        double distance = next_of[j] == never ? 1e18 : static_cast<double>(next_of[j] - k);
        double score = distance * static_cast<double>(models[j].bytes);
        if (score > worst) worst = score, victim = j;
      }
      resident[victim] = false;
      used -= models[victim].bytes;
      ++r.evictions;
    }
    resident[i] = true;
    used += models[i].bytes;
  }
  finish(r, requests, models, ids, bytes_missed);
  return r;
}

// The exact offline optimum of total load time, by dynamic programming over the set of resident
// models (a bitmask over the models the trace uses). After each request every reachable set
// carries the cheapest way to be in it. A hit keeps the set; a miss of m from set S may keep any
// subset T of S with bytes(T) + bytes(m) ≤ capacity (evicting S \ T). Voluntary evictions at
// other times never help (evicting is free and can wait until room is needed), so these
// transitions cover every schedule. Ties prefer fewer misses, then fewer evictions.
expected<sim_result> run_opt(const trace& requests, const catalog& models,
                             const std::vector<std::size_t>& ids, std::uint64_t capacity) {
  std::vector<std::size_t> used_models;  // catalog index of each bit
  std::unordered_map<std::size_t, std::size_t> bit_of;
  for (auto i : ids)
    if (!bit_of.count(i)) {
      bit_of[i] = used_models.size();
      used_models.push_back(i);
    }
  const std::size_t n = used_models.size();
  if (n > opt_max_models)
    return make_error(errc::invalid_argument, "opt handles at most " +
                                                  std::to_string(opt_max_models) +
                                                  " distinct models; the trace uses " +
                                                  std::to_string(n) + " (use belady-size)");
  const std::size_t states = std::size_t{1} << n;
  std::vector<std::uint64_t> bytes(states, 0);
  for (std::size_t s = 1; s < states; ++s) {
    std::size_t low = static_cast<std::size_t>(__builtin_ctzll(s));
    bytes[s] = bytes[s & (s - 1)] + models[used_models[low]].bytes;
  }
  struct cost {
    double load_ms = std::numeric_limits<double>::infinity();
    std::uint32_t misses = 0;
    std::uint32_t evictions = 0;
    double bytes_missed = 0;
    bool operator<(const cost& o) const {
      if (load_ms != o.load_ms) return load_ms < o.load_ms;
      if (misses != o.misses) return misses < o.misses;
      return evictions < o.evictions;
    }
  };
  std::vector<cost> dp(states), next(states);
  dp[0] = {0, 0, 0, 0};
  std::vector<std::size_t> live{0};  // reachable states
  std::vector<char> in_next(states, 0);
  for (auto i : ids) {
    const std::size_t bit = std::size_t{1} << bit_of.at(i);
    const auto& m = models[i];
    std::vector<std::size_t> reached;
    auto offer = [&](std::size_t s, cost c) {
      if (!in_next[s]) {
        in_next[s] = 1;
        next[s] = c;
        reached.push_back(s);
      } else if (c < next[s]) {
        next[s] = c;
      }
    };
    for (auto s : live) {
      const auto& c = dp[s];
      if (s & bit) {
        offer(s, c);
        continue;
      }
      // Keep T ⊆ S: enumerate submasks of S, largest first; only sets that fit with m.
      for (std::size_t t = s;; t = (t - 1) & s) {
        if (bytes[t] + m.bytes <= capacity) {
          auto evicted = static_cast<std::uint32_t>(__builtin_popcountll(s & ~t));
          offer(t | bit, {c.load_ms + m.load_ms, c.misses + 1, c.evictions + evicted,
                          c.bytes_missed + static_cast<double>(m.bytes)});
        }
        if (t == 0) break;
      }
    }
    for (auto s : reached) {
      dp[s] = next[s];
      in_next[s] = 0;
    }
    live = std::move(reached);
  }
  cost best;
  for (auto s : live)
    if (dp[s] < best) best = dp[s];
  sim_result r;
  r.policy = "opt";
  r.capacity_bytes = capacity;
  r.misses = best.misses;
  r.evictions = best.evictions;
  r.load_ms_total = best.load_ms;
  finish(r, requests, models, ids, best.bytes_missed);
  return r;
}

}  // namespace

expected<sim_result> simulate(const trace& requests, const catalog& models, std::uint64_t capacity,
                              const std::string& policy, policy_options options) {
  auto ids = resolve(requests, models, capacity);
  if (!ids) return std::move(ids).error();
  if (policy == "opt") return run_opt(requests, models, *ids, capacity);
  if (policy == "belady-size") return run_belady_size(requests, models, *ids, capacity);
  return run_online(requests, models, *ids, capacity, policy, options);
}

}  // namespace warm::eval
