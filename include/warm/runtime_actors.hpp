// For hosts that are CAF applications themselves: the runtime's actor system and actor handles.
// The messages they understand are in warm/actor_messages.hpp (warm::msg); they are local-only
// types. Most hosts should use warm::runtime's methods instead.
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <vector>

#include "warm/actor_messages.hpp"
#include "warm/runtime.hpp"

namespace warm {

struct runtime_actors {
  caf::actor_system* system = nullptr;
  caf::actor registry;             // registration, vmodels, uses, status (msg::register_model, ...)
  caf::actor loader_pool;          // the load queue (msg::inspect_loads)
  std::vector<caf::actor> devices;  // one per device, in option order (msg::inspect_device)
};

runtime_actors actors_of(runtime& rt);

}  // namespace warm
