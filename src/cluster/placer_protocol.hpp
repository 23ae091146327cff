// What the placer (cluster/placer.hpp) is sent, and its interface. Every message but
// decide_queued comes from outside the actor system (cluster_mode, the runtime's watch, the peer
// client's thread), sent anonymously; none is answered.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include "core/once_callback.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::cluster {
namespace msg {

// A miss for `model`, which no live instance holds: placed and served where placement says,
// answered exactly once (served here when the placer stops with it queued).
struct place_miss {
  std::string model;
  infer_request request;
  once_callback<infer_result> done;
};
// Its own: decide every model queued since (requests that arrived together: one etcd read and
// one claim per model).
struct decide_queued {};
// A load of `model` failed here (the runtime's LOADING_FAILED event): recorded in etcd.
struct load_failed_here {
  std::string model;
  error why;
};
// A request sent to `instance` (which placement chose) came back: its load failed there with
// `why`. Placed again without that instance, once; the failure is recorded for every instance.
// `done` answers `why` if the placer is gone.
struct refused_by_peer {
  std::string model;
  std::string instance;
  error why;
  infer_request request;
  once_callback<infer_result> done;
};
// Another instance went holding these hot models (its last record's): the adopting instance
// places and loads each one that no live instance holds or loads, and resumes pending vmodel
// transitions.
struct instance_gone {
  std::vector<std::string> hot;
};
// This instance is draining: it counts itself out of placement from now on.
struct start_draining {};
// Serve what is queued here and stop.
struct stop_placing {};

}  // namespace msg

using placer_actor =
    caf::typed_actor<caf::reacts_to<msg::place_miss>, caf::reacts_to<msg::decide_queued>,
                     caf::reacts_to<msg::load_failed_here>, caf::reacts_to<msg::refused_by_peer>,
                     caf::reacts_to<msg::instance_gone>, caf::reacts_to<msg::start_draining>,
                     caf::reacts_to<msg::stop_placing>>;

}  // namespace warm::cluster

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::place_miss)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::decide_queued)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::load_failed_here)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::refused_by_peer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::instance_gone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::start_draining)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::stop_placing)
