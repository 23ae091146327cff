// Drain: a leaving instance's recent models loaded on other instances before it goes
// (docs/cluster.md). Runs on the caller's thread (warmd's main thread at shutdown), which it
// blocks until every load answers or the deadline passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/claims.hpp"

namespace warm::cluster {

class member_view;
class peer_calls;

// A model to load elsewhere before this instance leaves.
struct migrant {
  std::string model;
  std::uint64_t bytes = 0;
};

struct migration {
  std::size_t loaded = 0;     // loaded on another instance by the deadline
  std::size_t elsewhere = 0;  // another instance already held it or was loading it
  std::size_t failed = 0;     // the load there failed, or did not finish by the deadline
  std::size_t unplaced = 0;   // no other instance could take it
};

// Places each of `models` (most valuable first) as a miss would be, with this instance counted out
// (draining), claims it, and asks the chosen instance to load it (peer_calls::ensure); all at
// once, waiting at most until `deadline`. A model another live instance holds is left alone.
// Migration claims are on no lease: they outlive this instance, which is about to leave.
// `log`: what could not be placed; may be empty.
migration migrate(placement_claims& claims, const member_view& members, peer_calls& peers,
                  const std::vector<migrant>& models,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void(const std::string&)>& log);

}  // namespace warm::cluster
