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
// Interface: warm::model_actor (actors/protocol/forward.hpp); what it is sent, by whom, and what
// it answers: actors/protocol/model_protocol.hpp.
// It tells the pool its registration {id, generation}, so that the pool tells its loads from
// those of an earlier or later registration of the same id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/protocol/forward.hpp"
#include "core/route_table.hpp"
#include "warm/clock.hpp"
#include "warm/model_repository.hpp"

namespace warm {

struct model_actor_config {
  std::string id;
  std::uint64_t generation = 0;  // the registration's (registry_actor.hpp)
  model_location where;          // the resolved model file
  std::uint64_t bytes = 0;       // what a device must reserve for it
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
