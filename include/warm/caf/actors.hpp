// For hosts that are CAF applications themselves: the runtime's actor system and its actors'
// typed handles. Their interfaces and messages are in warm/caf/messages.hpp (warm::msg); they are
// local-only types. Most hosts should use warm::runtime's methods instead; this header and
// warm/caf/messages.hpp are the only ones in include/warm/ that need CAF's headers.
#pragma once

#include <caf/actor_system.hpp>

#include <vector>

#include "warm/caf/messages.hpp"
#include "warm/runtime.hpp"

namespace warm {

struct runtime_actors {
  caf::actor_system* system = nullptr;
  registry_actor registry;             // registration, vmodels, uses, status (msg::register_model, ...)
  loader_pool_actor loader_pool;       // the load queue (msg::inspect_loads)
  std::vector<device_actor> devices;  // one per device, in option order (msg::inspect_device)
};

runtime_actors actors_of(runtime& rt);

}  // namespace warm
