#include "actors/watch_hub.hpp"

#include <caf/all.hpp>

#include <map>

#include "actors/protocol/watch_hub_protocol.hpp"

namespace warm {
namespace {

struct hub_state {
  std::map<std::uint64_t, std::function<void(const model_event&)>> listeners;
  std::uint64_t sequence = 0;
};

// `sequence`: the number before the first event's. (Every warm actor takes an argument: CAF 0.17
// dereferences a null argument tuple when an actor function takes none, which UBSan reports.)
watch_hub_actor::behavior_type watch_hub(watch_hub_actor::stateful_pointer<hub_state> self,
                                         std::uint64_t sequence) {
  self->state.sequence = sequence;
  return {
      [=](msg::state_changed& m) {
        m.event.sequence = ++self->state.sequence;
        for (auto& [id, listener] : self->state.listeners)
          listener(m.event);
      },
      [=](msg::add_watcher& m) { self->state.listeners[m.id] = std::move(m.listener); },
      [=](msg::remove_watcher& m) { self->state.listeners.erase(m.id); },
  };
}

}  // namespace

watch_hub_actor spawn_watch_hub(caf::actor_system& system) {
  return system.spawn(watch_hub, std::uint64_t{0});
}

}  // namespace warm
