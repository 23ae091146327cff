// A lease on a model ready to serve, as the actors hand it to the runtime's callers (inference,
// the batcher), and how a caller asks for one.
#pragma once

#include <memory>
#include <string>

#include "core/serving_slot.hpp"

namespace warm {

// How a use waits.
enum class use_kind {
  wait,       // the caller waits for the model (inference, ensureLoaded --sync)
  proactive,  // load in the background (loadNow, ensureLoaded without waiting)
};

// A model ready to serve: a lease on its slot. The slot pointer keeps the slot alive for as long
// as the lease (declared after it, so destroyed first) is held.
struct acquired {
  std::string model;
  std::shared_ptr<serving_slot> slot;
  serving_slot::lease lease;
  bool hit = false;     // no load was waited for
  double wait_ms = 0;   // time from the request's arrival to the lease
  timestamp arrived{};  // when the request arrived (the runtime's clock): its latency's start
};

}  // namespace warm
