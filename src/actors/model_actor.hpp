// The model actor: one per registered model that has been used (the registry spawns it on first
// use, so idle registrations cost only a registry row). Owns the model's state machine:
//
//   NOT_LOADED ──use──▶ QUEUED ──load_started──▶ LOADING ──load_done──▶ LOADED
//        ▲                 │                        │                      │
//        │                 └──────load_failed───────┴──▶ LOADING_FAILED    │
//        └──────────────── evicted (or a withdrawn slot seen on use) ◀─────┘
//   LOADING_FAILED ──use after retry_at, or the file changed, or forget_failure──▶ QUEUED
//   any state ──model_unregister──▶ (stops)
//
// Every waiting use is kept until the load completes and then answered with a lease, or with
// the load's error: one load per cold start however many requests arrive. A use while the model
// is LOADED is answered at once (the hit path normally never gets here: see route_table).
//
// Interface: warm::model_actor (warm/caf/messages.hpp):
//   client_use{kind, arrival, done} from the registry: a client's use, answered to the client's
//       callback `done` (a lease; empty for a proactive use; or an error), at once or, when it
//       waits, once the load is over. Dropped uncalled, the callback answers `unavailable`.
//   model_use{kind, arrival}        request from the registry (its own use: a vmodel's target) →
//       granted, the same answer as a response; a waiting one through a response promise.
//   model_status_request{}          request → model_status.
//   unload{reason unload}           request from the registry (an operator): unloads a loaded
//       copy or cancels a queued background load; the model stays registered.
//   unload{reason capacity|replaced, slot}  from a device actor: the slot was evicted.
//   model_unregister{}              from the registry: cancels the queued load, unloads, fails
//       waiters with not_found; the actor stops once no load of it is in flight.
//   load_started / load_failed / load_cancelled  from the loader pool.
//   load_done{slot}                 from a device actor.
//   forget_failure{}                request from the registry (an operator's retry): the failure
//       is forgotten here and in the pool; the next use loads.
//   file_checked{file}              from the offload. While LOADING_FAILED, a use that would fail
//       fast is held while the model's file is looked at: if it changed since the failed load
//       looked (size, mtime, inode; appeared or vanished), the failure is forgotten as a retry's
//       and the held uses wait for a new load; otherwise they fail fast.
// It tells the pool its registration {id, generation}, so that the pool tells its loads from
// those of an earlier or later registration of the same id.
#pragma once


#include <cstdint>
#include <memory>
#include <string>

#include "core/route_table.hpp"
#include "warm/caf/messages.hpp"
#include "warm/clock.hpp"
#include "warm/model_repository.hpp"

namespace warm {

struct model_actor_config {
  std::string id;
  std::uint64_t generation = 0;  // the registration's (registry_actor.hpp)
  model_location where;      // the resolved model file
  std::uint64_t bytes = 0;  // what a device must reserve for it
  loader_pool_actor pool;
  std::shared_ptr<route_table> routes;
  std::shared_ptr<const clock> time;
  watch_hub_actor hub;  // where state changes go (may be null)
  // Runs a task on a thread that may block (file I/O): a use while failing fast looks at the
  // model's file there. Without one a failure stays until it expires or is retried.
  std::function<void(std::function<void()>)> offload;
};

model_actor spawn_model_actor(caf::actor_system& system, const model_actor_config& config);

}  // namespace warm
