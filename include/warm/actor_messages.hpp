// The messages warm's actors exchange. Every message is a struct named for what it says; the
// receiving actor is named in its comment. Replies to clients travel as callbacks (warm::callback)
// invoked on the replying actor's thread; replies between actors are messages.
//
// These types never cross a process boundary, so they are registered as CAF's "unsafe" (local
// only) message types instead of carrying serialization code.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/actor.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/serving_slot.hpp"
#include "warm/clock.hpp"
#include "policy/importance.hpp"
#include "warm/device.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime_types.hpp"

namespace warm::msg {

// ---- client-facing results -------------------------------------------------------------------

// A model ready to serve: a lease on its slot. The slot pointer keeps the slot alive for as long
// as the lease (declared after it, so destroyed first) is held.
struct acquired {
  std::string model;
  std::shared_ptr<serving_slot> slot;
  serving_slot::lease lease;
  bool hit = false;      // no load was waited for
  double wait_ms = 0;    // time from the request's arrival to the lease
};

enum class use_kind {
  wait,       // the caller waits for the model (inference, ensureLoaded --sync)
  proactive,  // load in the background (loadNow, ensureLoaded without waiting)
};

// ---- to the registry ------------------------------------------------------------------------

struct register_model {
  std::string id;
  model_info info;
  bool load_now = false;
  bool sync = false;  // reply once loaded (or failed), not just once durable
  callback<void> done;
};
struct unregister_model {
  std::string id;
  callback<void> done;
};
// Uses `target` (model or vmodel id): a wait use answers `done` with a lease, a proactive use
// answers as soon as the load is queued (with an empty lease).
struct use_model {
  std::string target;
  use_kind kind = use_kind::wait;
  timestamp arrival{};
  std::function<void(expected<acquired>)> done;
};
struct get_status {
  std::string id;
  callback<model_status> done;
};
struct list_models {
  std::string after;        // page start: ids greater than this
  std::uint32_t limit = 0;  // 0 = all
  callback<std::vector<model_status>> done;
};
struct set_vmodel {
  std::string id;
  std::string target;
  bool auto_delete_target = false;
  std::optional<std::string> expected_target;  // compare-and-set on the current target
  callback<vmodel_status> done;
};
struct delete_vmodel {
  std::string id;
  callback<void> done;
};
struct get_vmodel_status {
  std::string id;
  callback<vmodel_status> done;
};
// Unloads a model (or a vmodel's active model) and keeps it registered.
struct unload_model {
  std::string id;
  callback<void> done;
};
// A model's metadata, read from its file's header.
struct describe_model {
  std::string id;
  callback<model_metadata> done;
};
// Statuses of every model with a live actor, plus registry totals.
struct inspect_models {
  std::function<void(std::vector<model_status>, std::uint64_t registered, std::uint64_t vmodels)> done;
};
// A target model of a vmodel finished loading (or failed): the registry flips or marks failure.
struct vmodel_target_ready {
  std::string vmodel;
  std::string target;
  expected<void> result;
};
// Commits pending registry writes (sent by the registry to itself after a batch of requests).
struct flush_registry {};

// ---- to a model actor -----------------------------------------------------------------------

struct model_use {
  use_kind kind = use_kind::wait;
  timestamp arrival{};
  std::function<void(expected<acquired>)> done;  // may be empty for proactive uses
};
struct model_status_request {
  callback<model_status> done;
};
// Unregistration: cancel, unload, fail waiters with not_found, then stop.
struct model_unregister {};
// An operator's unload: drop the loaded copy (or a queued background load); stay registered.
struct model_unload {
  callback<void> done;
};
struct load_started {
  std::string device;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // bytes copied so far (live)
};
struct load_done {
  std::string device;
  std::shared_ptr<serving_slot> slot;
  double seconds = 0;
};
// The pool gave up on the load: `error` is final (after retries); new uses fail fast with it
// until `retry_at`.
struct load_failed {
  warm::error error;
  timestamp retry_at{};
};
// The pool dropped a cancelled load; nothing of it remains.
struct load_cancelled {};
// The device evicted the model; `slot` is withdrawn and will free its bytes when quiescent.
struct evicted {
  std::shared_ptr<serving_slot> slot;
};

// ---- to the loader pool ---------------------------------------------------------------------

struct enqueue_load {
  std::string model;
  caf::actor owner;
  model_location where;
  std::uint64_t bytes = 0;
  bool waiting = false;
  timestamp when{};  // waiting: the first waiting request's arrival; proactive: the last use
  std::uint32_t waiters = 0;  // requests waiting on the load now (0 when proactive)
};
// More requests wait on a queued load of `model` than its owner last told: `waiters` now. Only
// for inspection; the queue's order does not change (the first waiter's arrival sets it).
struct load_waiters {
  std::string model;
  caf::actor owner;
  std::uint32_t waiters = 0;
};
// Cancels `owner`'s queued load of `model` (answered with load_cancelled; a running load
// finishes and is then unloaded by its owner) and forgets the model's failure records. Sent on
// an operator's unload and, load or not, when the model is unregistered.
struct cancel_load {
  std::string model;
  caf::actor owner;
};
struct reserve_result {
  std::uint64_t load_id = 0;
  std::shared_ptr<memory_reservation> reservation;  // set on success
  warm::error error;                                 // else why not
};
struct load_result {
  std::uint64_t load_id = 0;
  std::shared_ptr<std::unique_ptr<resident_model>> model;  // set on success
  warm::error error;
  double seconds = 0;
};
// A device freed bytes (or gained an evictable model) after refusing a reservation.
struct device_freed {
  std::size_t device = 0;
};
// The device actors, in the runtime's device order (sent once, right after spawning).
struct attach_devices {
  std::vector<caf::actor> devices;
};
struct inspect_loads {
  std::function<void(std::vector<queued_load>, std::vector<running_load>, std::vector<failure_info>,
                     std::uint64_t started, std::uint64_t failed)>
      done;
};

// ---- to a device actor ----------------------------------------------------------------------

struct reserve {
  std::uint64_t load_id = 0;
  std::string model;
  std::uint64_t bytes = 0;
};
struct install {
  std::string model;
  caf::actor owner;
  std::shared_ptr<std::unique_ptr<resident_model>> weights;
  double seconds = 0;
};
struct unload {
  std::string model;
  std::shared_ptr<serving_slot> slot;
};
struct slot_released {
  std::string model;
  const serving_slot* slot = nullptr;
  serving_slot::event what = serving_slot::event::quiesced;
};
struct inspect_device {
  callback<device_info> done;
};

// ---- importance scoring (policies with periodic scores, e.g. iam) ----------------------------

// From the scorer: send me your policy's score inputs (no answer for policies without scores).
struct collect_scores {
  caf::actor scorer;
};
// To the scorer: a snapshot of one device's score inputs.
struct scores_collected {
  std::size_t device = 0;
  std::vector<score_input> inputs;
  double bias = 1;
  timestamp taken{};
};
// From the scorer: a freshly built heap to replace the live one, in one message.
struct swap_scores {
  std::shared_ptr<const importance_heap> heap;
};
// The scorer's own timer.
struct rescore_tick {};
struct inspect_scorer {
  std::function<void(std::uint64_t rebuilds, double last_build_seconds)> done;
};

// ---- state-change events ----------------------------------------------------------------------

// From a model actor to the watch hub, on every state transition.
struct state_changed {
  model_event event;
};
struct add_watcher {
  std::uint64_t id = 0;
  std::function<void(const model_event&)> listener;
};
struct remove_watcher {
  std::uint64_t id = 0;
};

// ---- to a loader worker ---------------------------------------------------------------------

struct load_job {
  std::uint64_t load_id = 0;
  std::shared_ptr<device> dev;
  model_location where;
  std::shared_ptr<memory_reservation> reservation;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // the worker's live byte count
};

}  // namespace warm::msg

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::register_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unregister_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::use_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::get_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::list_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::set_vmodel)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::delete_vmodel)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::get_vmodel_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unload_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::describe_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_unload)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::vmodel_target_ready)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::flush_registry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_use)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_status_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_unregister)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_started)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_failed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_cancelled)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::evicted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::enqueue_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_waiters)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::cancel_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::device_freed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::attach_devices)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_loads)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::install)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unload)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::slot_released)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_device)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::state_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::add_watcher)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::remove_watcher)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::collect_scores)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::scores_collected)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::swap_scores)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::rescore_tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_scorer)
