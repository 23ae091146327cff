// The device actor: one per device. Owns the device's resident models (their serving slots), asks
// the cache policy for victims, and makes room before a load. It never over-commits: bytes are
// charged by the device's budget when reserved and return when a buffer is freed.
//
// Interface: warm::device_actor (actors/protocol/forward.hpp); what it is sent, by whom, and what
// it answers: actors/protocol/device_protocol.hpp. All from within the runtime.
// On exit every slot it holds is withdrawn, so the weights are freed once leases end.
// Withdrawn weights are freed by their reclaimer (core/weights.hpp), never in a handler here: a
// withdrawn slot counts as draining until its quiesced event arrives, after the bytes are back.
#pragma once

#include <cstddef>
#include <memory>

#include "actors/protocol/forward.hpp"
#include "core/serving_slot.hpp"
#include "policy/cache_policy.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/metrics.hpp"

namespace warm {

struct device_actor_config {
  std::size_t index = 0;  // position in the runtime's device list
  std::shared_ptr<device> dev;
  std::unique_ptr<cache_policy> policy;  // moved into the actor's state
  std::shared_ptr<const clock> time;
  std::shared_ptr<runtime_metrics> metrics;  // null: the actor keeps private ones
};

// Spawns a device actor reporting to `pool`.
device_actor spawn_device_actor(caf::actor_system& system, device_actor_config config,
                                loader_pool_actor pool);

}  // namespace warm
