// Placement: which instance of a cluster loads a model that no instance holds. Pure logic over
// what instances publish about themselves (instance_view); the cluster's placement code and the
// simulator's (`warm-eval simulate --instances N`) call the same functions.
//
// Two rules:
//  - warm: rank instances by what the load would cost there. An instance with free room (after
//    the bytes already reserved by claims in flight) costs nothing to fill; otherwise the cost is
//    the value its own policy would give up to make room (from the eviction candidates it
//    publishes, in load seconds), or, for policies that publish no value, how recently its least
//    recent model was used. Loads queued ahead of this one on the instance (its own and those
//    claimed on it since) add their expected wait. Ties go to an instance whose disk tier holds the
//    model's file (instance_view::tier_holds), then the one with the most room left, then the
//    fewest loads in flight, then the lowest index.
//  - modelmesh: ModelMesh's placement, for comparison. Its order: instances with room for the
//    model first; among full ones the oldest cache timestamp (least recent use of the least recent
//    model) first; then the fewest models, then the most free bytes; among instances with room,
//    last, the oldest cache timestamp. It then chooses at random within a shortlist of the
//    instances close to the first (modelmesh_shortlist). ModelMesh calls an instance full below a
//    fixed minimum of free space; here "full" means too little room for this model, which only
//    helps it.
// Draining instances, and instances too small for the model, are never candidates.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/clock.hpp"
#include "warm/error.hpp"

namespace warm {
class cache_policy;
}

namespace warm::ranking {

// A resident its policy would evict early: its bytes, and the value (load seconds the policy
// expects it to save) given up by evicting it.
struct eviction_candidate {
  std::uint64_t bytes = 0;
  double value = 0;
};

// What placement knows of an instance: its published record plus the bytes claimed on it since
// (reserved). Nothing here is assumed fresh except `reserved`, which claims keep exact.
struct instance_view {
  std::uint64_t capacity = 0;         // bytes models may use
  std::uint64_t used = 0;             // bytes resident when the record was published
  std::uint64_t reserved = 0;         // bytes claimed by loads placed here since, not yet in used
  std::uint32_t models = 0;           // resident models
  std::uint32_t loads_in_flight = 0;  // loads queued or running
  std::uint32_t reserved_loads = 0;   // loads claimed on it since (the claims behind `reserved`)
  std::uint32_t loading_threads = 1;  // loads it runs at once (≥ 1)
  double idle_seconds = 0;            // since its least recent model was used (0: empty)
  std::vector<eviction_candidate> candidates;  // in eviction order; empty: no value published
  bool draining = false;
  // Its disk tier holds the model's file: it loads from local disk, without fetching. The warm
  // rule prefers it among instances whose cost is the same.
  bool tier_holds = false;
};

// The model to place.
struct placement_request {
  std::uint64_t bytes = 0;
  double load_seconds = 0;  // expected load time, the unit of a queued load's wait
};

enum class placement_rule { warm, modelmesh };

// "warm" or "modelmesh"; invalid_argument naming both otherwise.
expected<placement_rule> parse_placement_rule(std::string_view name);
std::string_view to_string(placement_rule rule);

// The candidates for `request`, best first, as indices into `instances`. Leaves out draining
// instances and those whose capacity is below request.bytes; empty when none is left.
std::vector<std::size_t> rank_instances(const std::vector<instance_view>& instances,
                                        const placement_request& request, placement_rule rule);

// How many leading entries of `ranked` (rank_instances' modelmesh order) ModelMesh chooses among
// at random: the first, and those after it up to the first that is too far from it — when the
// first is full, a cache timestamp more than max(45 s, a tenth of the first's age) younger; when it
// has room, an instance without room for the model, with less than a quarter of the first's free
// bytes, or with 10 models or more and over 1.25 times the first's count. 0 when ranked is empty.
std::size_t modelmesh_shortlist(const std::vector<instance_view>& instances,
                                const std::vector<std::size_t>& ranked,
                                const placement_request& request);

// The bytes the instance must free for `bytes` more (0 when it has room after its reservations).
std::uint64_t bytes_to_free(const instance_view& instance, std::uint64_t bytes);

// The value given up on `instance` to make room for `bytes` more, beyond what it must already free
// for its reservations: free(need after) − free(need before), never below 0, where free(b) is
// what the instance's policy would give up to free b bytes, estimated from its candidates as kdf
// chooses: the cheaper of the candidates taken in order until they hold b (past the last one,
// their mean value per byte continues) and the cheapest single candidate holding b alone. 0 when
// nothing needs freeing, and with no candidates (the caller then falls back to idle_seconds).
double eviction_cost(const instance_view& instance, std::uint64_t bytes);

// Whether a policy's eviction-order scores are values in load seconds, which placement can weigh
// across instances: kdf's are; the others score by age, count or rank.
bool scores_are_values(std::string_view policy);

// A policy's eviction candidates: its first `count` residents in eviction order, each with its
// value; bytes_of gives a resident's size. Empty for every policy but kdf, whose scores are values
// in load seconds; the others score by age, count or rank.
std::vector<eviction_candidate> eviction_candidates(
    const cache_policy& policy, const std::function<std::uint64_t(const std::string&)>& bytes_of,
    timestamp now, std::size_t count = 16);

}  // namespace warm::ranking
