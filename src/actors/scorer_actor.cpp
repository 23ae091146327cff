#include "actors/scorer_actor.hpp"

#include <caf/all.hpp>

#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/scorer_protocol.hpp"

namespace warm {
namespace {

struct scorer_state {
  scorer_config config;
  std::uint64_t rebuilds = 0;
  double last_build_seconds = 0;
};

// Builds a heap from one device's inputs and sends it back to the device.
void rebuild(scorer_actor::stateful_pointer<scorer_state> self, const device_actor& device,
             msg::scores_collected& m) {
  auto& s = self->state;
  auto started = std::chrono::steady_clock::now();
  auto heap = build_importance_heap(std::move(m.inputs), m.bias, m.taken);
  s.last_build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ++s.rebuilds;
  if (s.config.metrics) s.config.metrics->importance_rebuild.observe(s.last_build_seconds);
  self->send(device, msg::swap_scores{std::move(heap)});
}

scorer_actor::behavior_type scorer(scorer_actor::stateful_pointer<scorer_state> self,
                                   std::shared_ptr<scorer_config> config) {
  self->state.config = std::move(*config);
  self->send(caf::actor_cast<scorer_actor>(self), msg::rescore_tick{});
  return {
      [=](msg::rescore_tick) {
        auto& s = self->state;
        for (auto& d : s.config.devices)
          self->request(d, caf::infinite, msg::collect_scores{})
              .then([=](msg::scores_collected& m) { rebuild(self, d, m); },
                    [](caf::error&) {});  // the device's policy keeps no scores (or it stopped)
        self->delayed_send(caf::actor_cast<scorer_actor>(self), s.config.period,
                           msg::rescore_tick{});
      },
      [=](msg::inspect_scorer& m) { m.done(self->state.rebuilds, self->state.last_build_seconds); },
  };
}

}  // namespace

scorer_actor spawn_scorer(caf::actor_system& system, scorer_config config) {
  // Detached: a rebuild sorts every resident's score, and that must not hold a scheduler thread
  // that the device and model actors need.
  return system.spawn<caf::detached>(scorer, std::make_shared<scorer_config>(std::move(config)));
}

}  // namespace warm
