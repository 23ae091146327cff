// The copy scaler of cluster mode (cluster/copy_rule.hpp, docs/cluster.md), as an actor: every
// tick it samples this instance's resident models' requests in flight and, for the models whose
// queueing calls for it, adds copies on other instances or drops the copy here.
//
// Contract (messages: cluster/copy_scaler_protocol.hpp):
//  - Decisions follow cluster::decide_copies, with the settle time counted from the model's last
//    change of copies in etcd. A change is one compare-and-set on the model's copies key (with
//    the first copy's claim, when adding), so holders deciding at once make one change. A
//    dropped copy is unloaded here (`unload`: requests in flight finish; the next ones are
//    forwarded to another copy).
//  - Detached: it waits on etcd and on the inspection (2 s at most) on its own thread, never a
//    CAF scheduler thread. etcd unreachable: nothing changes, the next tick tries again.
//  - stop_scaling ends it. What it borrows must outlive the actor.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "cluster/claims.hpp"
#include "cluster/copy_rule.hpp"
#include "cluster/copy_scaler_protocol.hpp"
#include "warm/runtime_types.hpp"

namespace warm::cluster {

class member_view;
class peer_calls;

struct copy_scaler_config {
  copy_rule rule;
  std::chrono::milliseconds tick{250};
  placement_claims::options claims;  // store, keys, this instance, claim life, counters
  member_view* members = nullptr;    // borrowed
  peer_calls* peers = nullptr;       // borrowed
  // The runtime's inspection (what is resident, its requests in flight) and its unload.
  std::function<void(callback<inspection>)> inspect;
  std::function<void(const std::string& model, callback<void>)> unload;
  std::function<void(const std::string&)> log;   // warnings; may be empty
  std::function<void(const std::string&)> note;  // each change; may be empty
};

// invalid_argument for a bad rule or tick, or a missing part. The rule must add copies
// (rule.add_queue > 0): with copies off, spawn none.
expected<copy_scaler_actor> spawn_copy_scaler(caf::actor_system& system, copy_scaler_config config);

}  // namespace warm::cluster
