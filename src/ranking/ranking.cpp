#include "ranking/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "policy/cache_policy.hpp"

namespace warm::ranking {
namespace {

// Bytes free after the instance's reservations; negative when they already overcommit it.
double room_left(const instance_view& v) {
  return static_cast<double>(v.capacity) - static_cast<double>(v.used) -
         static_cast<double>(v.reserved);
}

// What freeing `bytes` gives up, estimated from the candidates (see eviction_cost).
double value_to_free(const std::vector<eviction_candidate>& candidates, std::uint64_t bytes) {
  if (bytes == 0 || candidates.empty()) return 0;
  double in_order = 0, single = std::numeric_limits<double>::infinity();
  std::uint64_t freed = 0, all_bytes = 0;
  double all_value = 0;
  for (auto& c : candidates) {
    if (freed < bytes) in_order += c.value, freed += c.bytes;
    if (c.bytes >= bytes) single = std::min(single, c.value);
    all_bytes += c.bytes;
    all_value += c.value;
  }
  if (freed < bytes && all_bytes > 0)  // past the last candidate: their mean value per byte
    in_order += static_cast<double>(bytes - freed) * (all_value / static_cast<double>(all_bytes));
  return std::min(in_order, single);
}

// The expected wait behind the loads already queued on the instance, in seconds.
double queue_wait(const instance_view& v, const placement_request& r) {
  return static_cast<double>(v.loads_in_flight + v.reserved_loads) /
         std::max<std::uint32_t>(v.loading_threads, 1) * r.load_seconds;
}

// An empty instance has no least recent model: for ModelMesh's order it is the oldest of all.
double idle_for_order(const instance_view& v) {
  return v.models == 0 ? std::numeric_limits<double>::infinity() : v.idle_seconds;
}

}  // namespace

expected<placement_rule> parse_placement_rule(std::string_view name) {
  if (name == "warm") return placement_rule::warm;
  if (name == "modelmesh") return placement_rule::modelmesh;
  return make_error(errc::invalid_argument,
                    "unknown placement '" + std::string(name) + "' (known: warm, modelmesh)");
}

std::string_view to_string(placement_rule rule) {
  return rule == placement_rule::warm ? "warm" : "modelmesh";
}

std::uint64_t bytes_to_free(const instance_view& v, std::uint64_t bytes) {
  auto wanted = v.used + v.reserved + bytes;
  return wanted > v.capacity ? wanted - v.capacity : 0;
}

double eviction_cost(const instance_view& v, std::uint64_t bytes) {
  auto after = bytes_to_free(v, bytes);
  if (after == 0) return 0;
  return std::max(
      0.0, value_to_free(v.candidates, after) - value_to_free(v.candidates, bytes_to_free(v, 0)));
}

std::vector<std::size_t> rank_instances(const std::vector<instance_view>& instances,
                                        const placement_request& request, placement_rule rule) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < instances.size(); ++i)
    if (!instances[i].draining && instances[i].capacity >= request.bytes) out.push_back(i);

  if (rule == placement_rule::modelmesh) {
    auto key = [&](std::size_t i) {
      const auto& v = instances[i];
      bool full = room_left(v) < static_cast<double>(request.bytes);
      double oldest_first = -idle_for_order(v);
      return std::make_tuple(full, full ? oldest_first : 0.0, v.models, -room_left(v),
                             full ? 0.0 : oldest_first, i);
    };
    std::sort(out.begin(), out.end(),
              [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return out;
  }

  // warm: an instance whose policy publishes no value and that must evict ranks after every
  // instance with a known cost, oldest idle first (the only signal it gives).
  auto key = [&](std::size_t i) {
    const auto& v = instances[i];
    bool must_evict = bytes_to_free(v, request.bytes) > 0;
    bool unknown = must_evict && v.candidates.empty();
    double cost = unknown ? -v.idle_seconds : eviction_cost(v, request.bytes);
    return std::make_tuple(unknown, cost + queue_wait(v, request), !v.tier_holds, -room_left(v),
                           v.loads_in_flight, i);
  };
  std::sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return out;
}

std::size_t modelmesh_shortlist(const std::vector<instance_view>& instances,
                                const std::vector<std::size_t>& ranked,
                                const placement_request& request) {
  if (ranked.empty()) return 0;
  const auto& best = instances[ranked.front()];
  const bool best_full = room_left(best) < static_cast<double>(request.bytes);
  std::size_t n = 1;
  for (; n < ranked.size(); ++n) {
    const auto& v = instances[ranked[n]];
    if (best_full) {
      double younger =
          idle_for_order(best) - idle_for_order(v);  // seconds its LRU entry is younger
      if (std::isinf(idle_for_order(best))) younger = std::isinf(idle_for_order(v)) ? 0 : younger;
      if (younger > 45 && younger > idle_for_order(best) / 10) break;
    } else {
      if (room_left(v) < static_cast<double>(request.bytes) || room_left(v) < room_left(best) / 4)
        break;
      if (v.models >= 10 && v.models > best.models + best.models / 4) break;
    }
  }
  return n;
}

bool scores_are_values(std::string_view policy) {
  return policy == "kdf";
}

std::vector<eviction_candidate> eviction_candidates(
    const cache_policy& policy, const std::function<std::uint64_t(const std::string&)>& bytes_of,
    timestamp now, std::size_t count) {
  std::vector<eviction_candidate> out;
  if (!scores_are_values(policy.name())) return out;
  for (auto& r : policy.eviction_order(now)) {
    if (out.size() == count) break;
    out.push_back({bytes_of(r.model), r.score});
  }
  return out;
}

}  // namespace warm::ranking
