// The runtime's actor system and its actors' typed handles, for code inside warm that talks to
// the actors directly (tests of the actors behind a whole runtime). Internal: an embedding host
// uses warm::runtime's methods (warm/runtime.hpp). The interfaces are in
// actors/protocol/forward.hpp, each actor's messages in its protocol header beside it.
#pragma once

#include <caf/actor_system.hpp>

#include <vector>

#include "actors/protocol/forward.hpp"
#include "warm/runtime.hpp"

namespace warm {

struct runtime_actors {
  caf::actor_system* system = nullptr;
  registry_actor registry;        // registration, vmodels, uses, status (msg::register_model, ...)
  loader_pool_actor loader_pool;  // the load queue (msg::inspect_loads)
  std::vector<device_actor> devices;  // one per device, in option order (msg::inspect_device)
};

runtime_actors actors_of(runtime& rt);

}  // namespace warm
