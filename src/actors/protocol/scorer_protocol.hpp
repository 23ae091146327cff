// What the importance scorer (actors/scorer_actor.hpp) is sent: its own timer, and the runtime's
// inspection.
#pragma once

#include <cstdint>
#include <functional>

#include "actors/protocol/common.hpp"

namespace warm {
namespace msg {

// Its own timer: collect every device's score inputs and build fresh heaps off their mailboxes.
struct rescore_tick {};
// From the runtime: the number of rebuilds and the last one's duration.
struct inspect_scorer {
  std::function<void(std::uint64_t rebuilds, double last_build_seconds)> done;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::rescore_tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_scorer)
