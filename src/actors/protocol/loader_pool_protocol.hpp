// What the loader pool (actors/loader_pool.hpp) is sent: loads to queue, cancel or forget from
// model actors, room and losses from devices, and the runtime's setup and inspection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/protocol/common.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
namespace msg {

// From a model actor: queue (or promote) its load, with the model's registration, so that the
// pool tells its loads from those of an earlier or later registration of the same id. Answered
// load_failed at once when no device may take it. A load of an earlier registration of the same
// id (a smaller generation) is cancelled if queued (its owner told load_cancelled), or followed
// by this one once it is over.
struct enqueue_load {
  registration who;
  model_actor owner;  // where the load's outcome goes
  model_location where;
  std::uint64_t bytes = 0;
  bool waiting = false;
  timestamp when{};  // waiting: the first waiting request's arrival; proactive: the last use
  std::uint32_t waiters = 0;  // requests waiting on the load now (0 when proactive)
};
// From a model actor: more requests wait on a queued load of `who` than it last told, `waiters`
// now. Only for inspection; the queue's order does not change (the first waiter's arrival sets
// it).
struct load_waiters {
  registration who;
  std::uint32_t waiters = 0;
};
// From a model actor, on an operator's unload and, load or not, on unregistration: drop `who`'s
// queued load (answered with load_cancelled; a running load finishes and is then unloaded by its
// owner) and forget the model's failure records. Nothing is answered when there was no load.
struct cancel_load {
  registration who;
};
// From a model actor (an operator's retry, or its file changed since a failed load): forget
// `who`'s failure records; its queued or running load, if any, goes on.
struct forget_failures {
  registration who;
};
// From a device actor that refused a reservation: it freed bytes (or gained an evictable model),
// so loads may be placed on it again.
struct device_freed {
  std::size_t device = 0;
};
// A device's process died (a model runtime) with these models resident: each gets a failure
// record on it lasting `back_in` (until the device is expected back).
struct models_lost {
  std::size_t device = 0;
  std::vector<std::string> models;
  warm::error reason;
  std::chrono::nanoseconds back_in{};
  // The models whose inferences were running when the device's process died (crash suspects).
  std::vector<std::string> in_flight;
};
// From the runtime, once, right after spawning: the device actors, in the runtime's device order.
struct attach_devices {
  std::vector<device_actor> devices;
};
// From the runtime: the queue, the running loads, the failure records and the counters.
struct inspect_loads {
  std::function<void(std::vector<queued_load>, std::vector<running_load>, std::vector<failure_info>,
                     std::uint64_t started, std::uint64_t failed)>
      done;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::enqueue_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_waiters)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::cancel_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::forget_failures)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::device_freed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::models_lost)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::attach_devices)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_loads)
