// The device actor: one per device. Owns the device's resident models (their serving slots), asks
// the cache policy for victims, and makes room before a load. It never over-commits: bytes are
// charged by the device's budget when reserved and return when a buffer is freed.
//
// Interface: warm::device_actor (warm/caf/messages.hpp). All from within the runtime:
//   reserve{model, bytes}           request from the loader pool → reserve_result.
//       model_too_large if bytes exceed the capacity; otherwise evicts policy-chosen victims that
//       have no inference in flight (telling each owner unload{reason capacity}) and reserves
//       the bytes, or answers capacity_exhausted and sends the pool device_freed once anything
//       frees (a quiesced eviction, an idle model). With `settle` (the rest of a loaded model's
//       measured size) a refusal whose room is already draining is answered once the bytes are
//       back, before the pool hears of them.
//   install{model, owner, weights}  from the pool → load_done{slot} to the owner (model actor).
//   unload{model, slot, unload}     from a model actor (an operator's unload, unregistration)
//       → withdraws the slot.
//   slot_released{...}              from a slot's last lease (any thread).
//   collect_scores / swap_scores    from the scorer.
//   inspect_device{done}            → device_info.
// On exit every slot it holds is withdrawn, so the weights are freed once leases end.
// Withdrawn weights are freed by the reclaimer (config.reclaim), never in a handler here: a
// withdrawn slot counts as draining until its quiesced event arrives, after the bytes are back.
#pragma once


#include <cstddef>
#include <memory>

#include "policy/cache_policy.hpp"
#include "warm/caf/messages.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/metrics.hpp"
#include "core/serving_slot.hpp"

namespace warm {

struct device_actor_config {
  std::size_t index = 0;                  // position in the runtime's device list
  std::shared_ptr<device> dev;
  std::unique_ptr<cache_policy> policy;   // moved into the actor's state
  std::shared_ptr<const clock> time;
  std::shared_ptr<runtime_metrics> metrics;  // null: the actor keeps private ones
  // Where withdrawn weights are freed (serving_slot::set_reclaimer): off this actor's thread,
  // since freeing gigabytes (munmap, cudaFree) takes long. Unset: inline (tests of one actor).
  serving_slot::reclaim_fn reclaim;
};

// Spawns a device actor reporting to `pool`.
device_actor spawn_device_actor(caf::actor_system& system, device_actor_config config, loader_pool_actor pool);

}  // namespace warm
