// What the copy scaler (cluster/copy_scaler.hpp) is sent, and its interface. None is answered.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace warm::cluster {
namespace msg {

// Its own timer: sample the requests in flight and judge the models whose queueing calls for a
// change of copies.
struct scale_tick {};
// Stop (a draining instance adds and drops no copies).
struct stop_scaling {};

}  // namespace msg

using copy_scaler_actor =
    caf::typed_actor<caf::reacts_to<msg::scale_tick>, caf::reacts_to<msg::stop_scaling>>;

}  // namespace warm::cluster

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::scale_tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::cluster::msg::stop_scaling)
