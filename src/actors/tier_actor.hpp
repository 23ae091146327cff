// The disk tier actor: owns the local disk tier (sources/disk_tier.hpp) and hands out pinned local
// copies of remote model files. One fetch per file however many ask for it meanwhile: the first
// request for a file the tier lacks reserves room (evicting with the tier's policy) and starts a
// fetch task on `fetch_on`; later requests for the same file wait in the actor's state for that
// fetch, the way concurrent misses wait for one load. A pinned file is never evicted; each pin
// is released when the last copy of the answer's `pin` is dropped.
//
// Detached (its own thread): committing a file fsyncs it, which may take a while on a slow disk;
// the fetches themselves never run on it.
//
// Interface: warm::tier_actor (actors/protocol/forward.hpp); its messages:
// actors/protocol/tier_protocol.hpp.
#pragma once

#include <caf/actor_system.hpp>

#include <functional>
#include <memory>

#include "actors/protocol/forward.hpp"
#include "sources/disk_tier.hpp"
#include "sources/remote_repository.hpp"
#include "warm/metrics.hpp"

namespace warm {

struct tier_config {
  // The tier, or how to open it at the first request (a runtime that never meets a remote model
  // makes no directory for it). An open that fails is answered to that request and tried again
  // at the next.
  std::unique_ptr<sources::disk_tier> tier;
  std::function<expected<sources::disk_tier>()> open;
  std::shared_ptr<const sources::remote_repository> remote;
  // Runs a fetch task (it blocks on the network and the disk) on a thread that may block.
  std::function<void(std::function<void()>)> fetch_on;
  std::shared_ptr<runtime_metrics> metrics;  // the tier's gauges and counters (may be null)
};

tier_actor spawn_tier(caf::actor_system& system, tier_config config);

}  // namespace warm
