#include "actors/scorer_actor.hpp"

#include <caf/all.hpp>

#include "warm/actor_messages.hpp"

namespace warm {
namespace {

struct scorer_state {
  scorer_config config;
  std::uint64_t rebuilds = 0;
  double last_build_seconds = 0;
};

caf::behavior scorer(caf::stateful_actor<scorer_state>* self, std::shared_ptr<scorer_config> config) {
  self->state.config = std::move(*config);
  self->send(self, msg::rescore_tick{});
  return {
      [=](msg::rescore_tick) {
        auto& s = self->state;
        for (auto& d : s.config.devices) self->send(d, msg::collect_scores{caf::actor_cast<caf::actor>(self)});
        self->delayed_send(self, s.config.period, msg::rescore_tick{});
      },
      [=](msg::scores_collected& m) {
        auto& s = self->state;
        auto started = std::chrono::steady_clock::now();
        auto heap = build_importance_heap(std::move(m.inputs), m.bias, m.taken);
        s.last_build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        ++s.rebuilds;
        if (s.config.metrics) s.config.metrics->importance_rebuild.observe(s.last_build_seconds);
        if (m.device < s.config.devices.size()) self->send(s.config.devices[m.device], msg::swap_scores{std::move(heap)});
      },
      [=](msg::inspect_scorer& m) { m.done(self->state.rebuilds, self->state.last_build_seconds); },
  };
}

}  // namespace

caf::actor spawn_scorer(caf::actor_system& system, scorer_config config) {
  // Detached: a rebuild sorts every resident's score, and that must not hold a scheduler thread
  // that the device and model actors need.
  return system.spawn<caf::detached>(scorer, std::make_shared<scorer_config>(std::move(config)));
}

}  // namespace warm
