// warm-bench policy: eviction decisions per second for each policy with `resident` models on the
// device, the policy code exactly as the device actor runs it. The device is full: its capacity
// is the bytes of the `resident` models it starts with. One decision = choose victims for an
// incoming model (the bytes it needs beyond the capacity), evict them, insert the newcomer, plus
// the accesses of ten hits; so the device stays full and holds about `resident` models throughout.
// Simulated time advances 1 ms per decision, so iam rebuilds its heap (all residents) every 1000.
// Reported per policy: decisions per second, and each decision's own time (p50, p99, max in µs):
// a decision runs on the device actor's thread, so its tail (a full index rebuild, say) is how
// long that device's other messages wait.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "policy/cache_policy.hpp"

namespace warm::bench {

int run_policy(const policy_bench_options& options) {
  if (options.resident < 2) {
    std::fprintf(stderr, "warm-bench policy: --resident must be at least 2\n");
    return 1;
  }
  for (auto& name : options.policies)
    if (std::find(policy_names().begin(), policy_names().end(), name) == policy_names().end()) {
      std::fprintf(stderr, "warm-bench policy: unknown policy '%s'\n", name.c_str());
      return 1;
    }
  nlohmann::ordered_json results = nlohmann::json::array();
  for (auto& name : policy_names()) {
    if (!options.policies.empty() &&
        std::find(options.policies.begin(), options.policies.end(), name) == options.policies.end())
      continue;
    std::mt19937_64 rng(1);
    std::uniform_int_distribution<std::uint64_t> size(1, 100);
    policy_options tuning;
    tuning.capacity = options.resident * 50;  // about the bytes of `resident` models of 1-100
    auto made = make_policy(name, tuning);
    if (!made) return 1;
    auto& policy = **made;
    // The bench's own bookkeeping: one map lookup per insert and three per removal.
    struct slot {
      std::size_t index;  // in ids
      std::uint64_t bytes;
    };
    std::vector<std::string> ids;                 // resident models, for picking hits
    std::unordered_map<std::string, slot> where;  // id → its place and bytes
    timestamp now{};
    std::uint64_t next = 0;
    std::uint64_t used = 0;
    auto insert = [&](std::uint64_t b) {
      auto id = "m" + std::to_string(next++);
      policy.on_insert(id, b, static_cast<double>(b) / 1000, now);  // load time ∝ size
      where[id] = {ids.size(), b};
      ids.push_back(std::move(id));
      used += b;
    };
    auto remove = [&](const std::string& id) {
      auto it = where.find(id);
      auto i = it->second.index;
      used -= it->second.bytes;
      where[ids.back()].index = i;
      std::swap(ids[i], ids.back());
      ids.pop_back();
      where.erase(it);
    };
    for (std::uint64_t i = 0; i < options.resident; ++i)
      insert(size(rng));
    const std::uint64_t capacity = used;
    auto none = [](const std::string&) { return false; };

    std::uint64_t decisions = 0;
    std::vector<double> decision_us;
    decision_us.reserve(1 << 20);
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(options.seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      for (int batch = 0; batch < 64; ++batch) {
        auto began = std::chrono::steady_clock::now();
        now += std::chrono::milliseconds(1);
        for (int hit = 0; hit < 10; ++hit) {
          std::uniform_int_distribution<std::size_t> pick(0, ids.size() - 1);
          policy.on_access(ids[pick(rng)], now, 1);
        }
        auto b = size(rng);
        auto need = used + b > capacity ? used + b - capacity : 0;
        auto victims = policy.choose_victims("m" + std::to_string(next), need, none, now);
        for (auto& v : victims) {
          policy.on_remove(v, true);
          remove(v);
        }
        insert(b);
        ++decisions;
        decision_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began)
                .count());
      }
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    results.push_back({{"policy", name},
                       {"decisions_per_s", static_cast<double>(decisions) / seconds},
                       {"decision_p50_us", percentile(decision_us, 50)},
                       {"decision_p99_us", percentile(decision_us, 99)},
                       {"decision_max_us", percentile(decision_us, 100)},
                       {"decisions_over_1ms", std::count_if(decision_us.begin(), decision_us.end(),
                                                            [](double us) { return us > 1000; })},
                       {"residents_at_end", ids.size()}});
  }
  nlohmann::ordered_json out{
      {"scenario", "policy"}, {"resident", options.resident}, {"results", results}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
