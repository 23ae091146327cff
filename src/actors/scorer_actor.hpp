// The importance scorer actor: every `period` it asks each device actor for its policy's score
// inputs (request rates, load penalties, resident bytes), builds a fresh importance heap on its
// own thread — away from the device actors' mailboxes — and sends it back; the device swaps its
// live heap in one message. Devices keep evicting from the old heap until then and score models
// inserted between rebuilds themselves. Only spawned when some device's policy rescores (iam).
//
// Interface: warm::scorer_actor (actors/protocol/forward.hpp); its messages:
// actors/protocol/scorer_protocol.hpp. It requests collect_scores from each device and gets
// scores_collected back as the response (an error from a device whose policy keeps no scores).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "actors/protocol/forward.hpp"
#include "warm/clock.hpp"
#include "warm/metrics.hpp"

namespace warm {

struct scorer_config {
  std::vector<device_actor> devices;
  std::chrono::milliseconds period{1000};
  std::shared_ptr<const clock> time;
  std::shared_ptr<runtime_metrics> metrics;  // rebuild times (may be null)
};

scorer_actor spawn_scorer(caf::actor_system& system, scorer_config config);

}  // namespace warm
