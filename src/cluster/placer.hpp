// The placer: cluster misses for models that no instance holds (docs/cluster.md), as an actor.
// It reads the placement claims in etcd, decides with cluster::decide_placement, claims the model
// by a compare-and-set when this instance places it (placement_claims), and hands each request to
// the instance that loads it: this one (the runtime) or a peer (peer_calls).
//
// Contract (messages: cluster/placer_protocol.hpp):
//  - Detached: its thread waits on etcd and on the runtime's status answers (2 s at most), never
//    a CAF scheduler thread, and its mailbox orders everything it is told.
//  - Every place_miss is answered exactly once, from the runtime or a peer. Misses that arrive
//    while it decides are decided together afterwards, one etcd read and one claim per model.
//  - etcd unreachable, a model this instance cannot size, or no member to place on: the request
//    is served here, as a warmd running alone would.
//  - A request sent to the instance placement chose comes back when the model's load fails there
//    (load_failed, capacity_exhausted, model_too_large): it is placed again, once, without that
//    instance. A model whose load failed here is placed elsewhere too. Failed loads, here (the
//    runtime's LOADING_FAILED events, which it watches from spawn to stop_placing) or answered by
//    a peer, are recorded in etcd for 15 minutes.
//  - instance_gone: only the live instance with the lowest name that is not draining adopts (every
//    instance is told); claims keep a model one load besides. Pending vmodel transitions in the
//    cluster's registry (the instance that went may have set them) are set again here, so that
//    this instance loads their targets and flips them.
//  - stop_placing serves what is queued here. The runtime, member view and peers it borrows must
//    outlive the actor: send stop_placing and wait for it to end before they go.
#pragma once

#include <caf/fwd.hpp>

#include <functional>
#include <string>

#include "cluster/claims.hpp"
#include "cluster/placer_protocol.hpp"

namespace warm {
class runtime;
}

namespace warm::cluster {

class member_view;
class peer_calls;

struct placer_config {
  placement_claims::options claims;             // store, keys, this instance, claim life, counters
  runtime* rt = nullptr;                        // borrowed
  member_view* members = nullptr;               // borrowed
  peer_calls* peers = nullptr;                  // borrowed
  std::function<void(const std::string&)> log;  // warnings; may be empty
};

// invalid_argument when a borrowed part is missing. Returns once the placer watches the runtime's
// events (blocks the caller briefly: not on a CAF scheduler thread).
expected<placer_actor> spawn_placer(caf::actor_system& system, placer_config config);

}  // namespace warm::cluster
