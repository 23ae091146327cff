// The watch hub: model actors report every state transition here; it calls each registered
// listener, in the order the events arrive, on its own actor thread (listeners must not block).
//
// Interface: warm::watch_hub_actor (actors/protocol/forward.hpp); its messages:
// actors/protocol/watch_hub_protocol.hpp.
#pragma once

#include "actors/protocol/forward.hpp"

namespace warm {

watch_hub_actor spawn_watch_hub(caf::actor_system& system);

}  // namespace warm
