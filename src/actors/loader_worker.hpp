// A loader pool's worker (actors/loader_pool.hpp): a detached actor, so a load's file reads, fetch
// waits and device copies block its own thread and never a scheduler's. The pool spawns
// max_concurrent_loads of them and sends each one load_job at a time.
#pragma once

#include <memory>

#include "actors/protocol/forward.hpp"
#include "actors/protocol/loader_worker_protocol.hpp"
#include "actors/protocol/tier_protocol.hpp"
#include "core/weights.hpp"
#include "warm/model_loader.hpp"

namespace warm {

// What a worker holds: how to load, where dropped weights go, and how to get a remote model's
// local copy.
struct loader_worker_state {
  std::shared_ptr<model_loader> loader;
  reclaim_fn reclaim;  // where the weights it loads are freed, whoever drops them
  materialize_fn materialize;
};

// The worker's behaviour (spawn it detached): runs one load at a time for the pool, answering
// each load_job request with its load_result. A remote model is first materialized (a dense one
// on a device of this process follows its fetch, and is kept only when the fetch ends verified);
// dropped weights always go through `reclaim`.
loader_worker_actor::behavior_type loader_worker(
    loader_worker_actor::stateful_pointer<loader_worker_state> self,
    std::shared_ptr<model_loader> loader, reclaim_fn reclaim, materialize_fn materialize);

}  // namespace warm
