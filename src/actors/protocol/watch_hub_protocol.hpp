// What the watch hub (actors/watch_hub.hpp) is sent: model actors' state transitions, and the
// runtime's listeners coming and going.
#pragma once

#include <cstdint>
#include <functional>

#include "actors/protocol/common.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
namespace msg {

// From a model actor to the watch hub, on every state transition.
struct state_changed {
  model_event event;
};
// From the runtime: call `listener` on every state change from now on.
struct add_watcher {
  std::uint64_t id = 0;
  std::function<void(const model_event&)> listener;
};
// From the runtime: stop calling the listener added with `id`.
struct remove_watcher {
  std::uint64_t id = 0;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::state_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::add_watcher)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::remove_watcher)
