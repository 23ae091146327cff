// The watch hub: model actors report every state transition here; it calls each registered
// listener, in the order the events arrive, on its own actor thread (listeners must not block).
//
// Interface: warm::watch_hub_actor (warm/caf/messages.hpp): state_changed (from model actors),
// add_watcher / remove_watcher (from the runtime).
#pragma once

#include "warm/caf/messages.hpp"

namespace warm {

watch_hub_actor spawn_watch_hub(caf::actor_system& system);

}  // namespace warm
