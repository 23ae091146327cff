// The loader pool actor: the load queue, failure records, retries and the loader workers.
//
// Loads run on `max_concurrent_loads` worker actors spawned detached (each its own thread), never
// on CAF scheduler threads; a worker reports its result as a message. A load goes
//   queued → reserving (a device actor makes room) → loading (a worker copies the bytes)
//   [→ settling] → installed on the device, which tells the model actor; or → failed / cancelled.
// A backend that measures its model (TorchScript) may find it takes more than was reserved: the
// load then settles, asking the device actor to reserve the rest (evicting for it like any
// reservation). When the rest cannot be had, the model is dropped and the attempt fails with
// capacity_exhausted (model_too_large when it exceeds the device), and the next attempt reserves
// the measured size from the start. A model never serves before its whole size is charged.
// Reservations count against max_concurrent_loads, so at most that many loads hold bytes
// without being resident.
//
// Interface: warm::loader_pool_actor (actors/protocol/forward.hpp); what it is sent, by whom, and
// what it answers: actors/protocol/loader_pool_protocol.hpp.
// The pool asks a device to reserve (request reserve → reserve_result) and a worker to load
// (request load_job → load_result); both answers come back as CAF responses.
//
// Failures: a failed load records (model, device, time, error) and is retried at once on another
// device with no unexpired record, up to `max_attempts` in all; then the owner gets load_failed
// with the last error and the time when a record next expires. model_too_large is never retried.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "actors/protocol/forward.hpp"
#include "actors/protocol/tier_protocol.hpp"
#include "core/serving_slot.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/metrics.hpp"
#include "warm/model_loader.hpp"

namespace warm {

struct loader_pool_config {
  std::vector<std::shared_ptr<device>> devices;
  std::shared_ptr<model_loader> loader;
  std::shared_ptr<const clock> time;
  std::uint32_t max_concurrent_loads = 2;
  std::uint32_t max_attempts = 3;
  std::chrono::nanoseconds failure_expiry = std::chrono::minutes(10);
  std::shared_ptr<runtime_metrics> metrics;  // null: the pool keeps private ones
  // Where loaded weights are freed, off every actor's thread: the workers make each model's weights
  // with it (core/weights.hpp), so a load the pool drops (cancelled, or refused after it
  // finished) and a slot's last lease both free there. Required.
  reclaim_fn reclaim;
  // A local copy of a model from a remote source (model_location::source set), pinned while the
  // load reads it: the disk tier's copy, fetched again first when the tier evicted it. Called on
  // a worker's thread; blocks. A dense model loaded on a device of this process follows the fetch
  // (copy_mode::arriving) and is kept only when the fetch ends verified. Null: remote models
  // fail to load.
  materialize_fn materialize;
};

// Spawns the pool and its workers (std::logic_error without config.reclaim). Device actors are
// attached afterwards (they need the pool's handle): send them to the pool through
// attach_devices().
loader_pool_actor spawn_loader_pool(caf::actor_system& system, loader_pool_config config);
void attach_devices(const loader_pool_actor& pool, std::vector<device_actor> device_actors);

}  // namespace warm
