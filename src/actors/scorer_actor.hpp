// The importance scorer actor: every `period` it asks each device actor for its policy's score
// inputs (request rates, load penalties, resident bytes), builds a fresh importance heap on its
// own thread — away from the device actors' mailboxes — and sends it back; the device swaps its
// live heap in one message. Devices keep evicting from the old heap until then and score models
// inserted between rebuilds themselves. Only spawned when some device's policy rescores (iam).
//
// Messages: rescore_tick (its own timer), scores_collected (from devices), inspect_scorer.
#pragma once

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "warm/clock.hpp"
#include "warm/metrics.hpp"

namespace warm {

struct scorer_config {
  std::vector<caf::actor> devices;
  std::chrono::milliseconds period{1000};
  std::shared_ptr<const clock> time;
  std::shared_ptr<runtime_metrics> metrics;  // rebuild times (may be null)
};

caf::actor spawn_scorer(caf::actor_system& system, scorer_config config);

}  // namespace warm
