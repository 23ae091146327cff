// What a device actor (actors/device_actor.hpp) is sent: reservations and installs from the
// loader pool, withdrawals from model actors, its slots' and its device's own reports, the
// scorer's score exchange, and the runtime's and version manager's requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/common.hpp"
#include "core/serving_slot.hpp"
#include "core/weights.hpp"
#include "policy/importance.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
namespace msg {

// From the loader pool, request; answered with reserve_result. model_too_large when `bytes`
// exceed the capacity; otherwise evicts policy-chosen victims that have no inference in flight
// (telling each owner slot_evicted) and reserves the bytes, or answers capacity_exhausted and
// sends the pool device_freed once anything frees (a quiesced eviction, an idle model).
struct reserve {
  std::string model;
  std::uint64_t bytes = 0;
  // The rest of a loaded model's measured size: when the models evicted for it are still
  // draining, answered once their bytes are back rather than refused at once.
  bool settle = false;
};
// The answer to reserve.
struct reserve_result {
  std::shared_ptr<memory_reservation> reservation;  // set on success
  warm::error error;                                // else why not
};
// From the loader pool: a loaded model, its charge settled. Becomes a slot, and its owner is told
// load_done; a resident copy of an earlier registration of the model is evicted (replaced).
struct install {
  std::string model;
  model_actor owner;                       // told load_done
  std::shared_ptr<warm::weights> weights;  // its charge settled
  double seconds = 0;
  std::uint64_t predicted = 0;  // the bytes reserved before the load (inspection)
};
// From `model`'s actor, on an operator's unload or on unregistration: stop serving `slot` and free
// its bytes once its last lease is gone.
struct withdraw_slot {
  std::string model;
  std::shared_ptr<serving_slot> slot;
};
// From a slot's last lease, on whatever thread dropped it: the slot went idle, or a withdrawn
// slot quiesced (its bytes are back). Wakes a waiting pool.
struct slot_released {
  std::string model;
  const serving_slot* slot = nullptr;
  serving_slot::event what = serving_slot::event::quiesced;
};
// From the device itself (device::watch), on its thread: its models lost, its capacity changed,
// or ready again.
struct device_changed {
  device_event event;
};
// From the runtime: the device's state (device_info), answered through `done`.
struct inspect_device {
  callback<device_info> done;
};
// Keeps `model` from being chosen as a victim (or lets it be again): the version manager pins a
// served model's default version while a new one loads, so the roll cannot evict what serves.
// Pins do not count: the last message for a model wins.
struct pin_model {
  std::string model;
  bool pinned = true;
};
// From the scorer, request; answered with scores_collected, or an error when the device's policy
// keeps no scores.
struct collect_scores {};
// The answer to collect_scores: a snapshot of one device's score inputs.
struct scores_collected {
  std::vector<score_input> inputs;
  double bias = 1;
  timestamp taken{};
};
// From the scorer: a freshly built heap to replace the live one, in one message.
struct swap_scores {
  std::shared_ptr<const importance_heap> heap;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::install)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::withdraw_slot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::slot_released)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::device_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_device)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::pin_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::collect_scores)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::scores_collected)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::swap_scores)
