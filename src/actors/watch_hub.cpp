#include "actors/watch_hub.hpp"

#include <caf/all.hpp>

#include <map>

#include "warm/actor_messages.hpp"

namespace warm {
namespace {

struct hub_state {
  std::map<std::uint64_t, std::function<void(const model_event&)>> listeners;
  std::uint64_t sequence = 0;
};

caf::behavior watch_hub(caf::stateful_actor<hub_state>* self) {
  return {
      [=](msg::state_changed& m) {
        m.event.sequence = ++self->state.sequence;
        for (auto& [id, listener] : self->state.listeners) listener(m.event);
      },
      [=](msg::add_watcher& m) { self->state.listeners[m.id] = std::move(m.listener); },
      [=](msg::remove_watcher& m) { self->state.listeners.erase(m.id); },
  };
}

}  // namespace

caf::actor spawn_watch_hub(caf::actor_system& system) { return system.spawn(watch_hub); }

}  // namespace warm
