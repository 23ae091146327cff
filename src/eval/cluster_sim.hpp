// The cluster simulator: a trace through N instances, each running the daemon's own policy code,
// with the cluster's own placement code (ranking/ranking.hpp) choosing where a model no instance
// holds is loaded. Unlike the one-device simulator, loads take time: each instance runs
// `loading_threads` loads at once, a load waits for a free thread, and requests for a model whose
// load is under way wait for that one load (one load cluster-wide). Time is the trace's.
//
// What placement sees. Instances publish their record (used bytes, models, idle age, eviction
// candidates, loads in flight) every `record_seconds` of trace time, as they would to etcd;
// placement works from the last records.
//  - warm: a placement claims the model's bytes on its instance (the claim is part of the
//    decision), so later placements see them as reserved until the next record; loads in flight
//    are counted from the claims.
//  - modelmesh: placements between two records see the last record only, as ModelMesh's instance
//    records do: cold loads in a burst go where the record said there was room. The instance is
//    drawn at random within ModelMesh's shortlist (a generator seeded with `seed`).
// record_seconds = 0 publishes before every placement (fresh records, for comparison).
//
// Memory that travels. A model's record carries what the policy of the instance that evicted it
// remembered of its requests (cache_policy::remembered), and the instance that loads it next
// starts from that; the instances' policies share one time scale (cache_policy::share_time_scale,
// the geometric mean of theirs, agreed at every record), so that values compare across them.
//
// One copy per model: a model lives on one instance at a time (copies for hot models are not
// simulated); a model evicted from an instance may be placed anywhere on its next miss. A load
// under way is evicted only when no candidate instance can make room otherwise (`forced`).
#pragma once

#include <cstdint>
#include <string>

#include "eval/catalog.hpp"
#include "eval/trace.hpp"
#include "ranking/ranking.hpp"
#include "warm/error.hpp"
#include "warm/policy_options.hpp"

namespace warm::eval {

struct cluster_options {
  std::size_t instances = 4;            // ≥ 1
  std::uint64_t instance_capacity = 0;  // bytes per instance; every model must fit one
  std::string policy = "kdf";           // every instance's eviction policy
  ranking::placement_rule placement = ranking::placement_rule::warm;
  double record_seconds = 2;          // ≥ 0: how often instances republish their records
  std::uint32_t loading_threads = 1;  // ≥ 1 per instance
  std::uint64_t seed = 1;             // ModelMesh's random choice within its shortlist
  policy_options tuning;
};

struct cluster_result {
  std::string policy;
  std::string placement;
  std::size_t instances = 0;
  std::uint64_t instance_capacity = 0;
  std::uint64_t requests = 0;
  std::uint64_t cold_starts = 0;  // loads (a request for a model no instance held or was loading)
  std::uint64_t waited = 0;       // requests that waited for a load (the cold start's included)
  std::uint64_t evictions = 0;
  std::uint64_t forced = 0;  // placements that had to evict a model still loading
  double hit_ratio = 0;      // requests served without waiting
  double load_ms_total = 0;  // the loads' own time
  double wait_ms_total = 0;  // what requests waited, queueing behind other loads included
  double wait_ms_per_request = 0;
  double max_share = 0;  // the largest share of the loads one instance took
};

// Runs the trace. invalid_argument for a model missing from the catalog or larger than an
// instance, an unknown policy, 0 instances or loading threads, or a negative record interval.
expected<cluster_result> simulate_cluster(const trace& requests, const catalog& models,
                                          const cluster_options& options);

}  // namespace warm::eval
