// warm's actor protocols: every actor's interface as a caf::typed_actor, and the messages they
// exchange. Only for hosts that are CAF applications themselves (warm/caf/actors.hpp); nothing
// else in include/warm/ needs CAF.
//
// Two kinds of answers:
// - At the runtime's edge (the messages warm::runtime sends in, whose answers go back to client
//   code) the answer is a callback (warm::callback, or a std::function named `done`) carried in
//   the message and called once, on the answering actor's thread.
// - Between actors an answer is a CAF response: the asking actor uses
//   `self->request(dest, caf::infinite, m).then(...)`, the answering one returns the value or a
//   `caf::error` (or a response promise when it answers later). A warm::error travels as a
//   caf::error of category "warm" (to_caf_error / from_caf_error below).
//
// A registration is named by `registration{id, generation}`: the registry bumps the generation on
// every (re)registration of an id, so a message of an earlier registration of the same id is
// recognised as stale by comparing generations.
//
// These types never cross a process boundary, so they are registered as CAF's "unsafe" (local
// only) message types instead of carrying serialization code.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "policy/importance.hpp"
#include "storage/file.hpp"
#include "warm/metrics.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime_types.hpp"
#include "core/serving_slot.hpp"
#include "storage/registry_storage.hpp"

namespace warm {

struct registry_description;  // a model file's description, kept by the registry (opaque here)
struct model_resolution;      // a model file found beneath its root and its header checked (opaque)

namespace msg {

// Every message, declared first: the interfaces below name them, and some messages carry the
// handle of an actor whose interface names other messages.
struct register_model;
struct unregister_model;
struct use_model;
struct get_status;
struct list_models;
struct set_vmodel;
struct delete_vmodel;
struct get_vmodel_status;
struct unload_model;
struct retry_model;
struct describe_model;
struct inspect_models;
struct flush_registry;
struct description_read;
struct model_resolved;
struct store_commit;
struct store_committed;
struct store_close;
struct store_seen;
struct store_update;
struct model_use;
struct client_use;
struct granted;
struct model_status_request;
struct model_unregister;
struct unload;
struct forget_failure;
struct file_checked;
struct load_started;
struct load_done;
struct load_failed;
struct load_cancelled;
struct enqueue_load;
struct load_waiters;
struct cancel_load;
struct forget_failures;
struct device_freed;
struct models_lost;
struct device_changed;
struct attach_devices;
struct inspect_loads;
struct load_job;
struct load_result;
struct reserve;
struct reserve_result;
struct install;
struct slot_released;
struct inspect_device;
struct pin_model;
struct collect_scores;
struct scores_collected;
struct swap_scores;
struct rescore_tick;
struct inspect_scorer;
struct state_changed;
struct add_watcher;
struct remove_watcher;

}  // namespace msg

// ---- interfaces ------------------------------------------------------------------------------

// The registry (src/actors/registry_actor.hpp): models, vmodels, and every request naming one.
using registry_actor = caf::typed_actor<
    caf::reacts_to<msg::register_model>,     // runtime: register (answered once durable)
    caf::reacts_to<msg::unregister_model>,   // runtime: unregister (answered once durable)
    caf::reacts_to<msg::use_model>,          // runtime: a miss, or ensureLoaded; forwarded as model_use
    caf::reacts_to<msg::get_status>,         // runtime: one model's status
    caf::reacts_to<msg::list_models>,        // runtime: a page of statuses
    caf::reacts_to<msg::set_vmodel>,         // runtime: create or retarget a vmodel
    caf::reacts_to<msg::delete_vmodel>,      // runtime: delete a vmodel
    caf::reacts_to<msg::get_vmodel_status>,  // runtime: one vmodel's status
    caf::reacts_to<msg::unload_model>,       // runtime: an operator's unload; forwarded as unload
    caf::reacts_to<msg::retry_model>,        // runtime: forget a model's load failures; forwarded
    caf::reacts_to<msg::describe_model>,     // runtime: a model's metadata from its header
    caf::reacts_to<msg::inspect_models>,     // runtime: statuses of models with an actor, totals
    caf::reacts_to<msg::flush_registry>,     // itself: commit the staged writes (group commit)
    caf::reacts_to<msg::description_read>,   // a describe's worker thread: keep its description
    caf::reacts_to<msg::model_resolved>,     // a resolving worker thread: a model file's header
    caf::reacts_to<msg::store_update>>;      // a shared store's follower: others' changes

// The registry's store writer (detached: the only actor that waits on SQLite).
using registry_writer_actor = caf::typed_actor<
    caf::replies_to<msg::store_commit>::with<msg::store_committed>,  // registry: one group commit
    caf::reacts_to<msg::store_close>,                                 // registry (stopping): last commit, stop
    caf::reacts_to<msg::store_seen>>;                                 // registry: others' changes taken in

// A model actor (src/actors/model_actor.hpp): one registration's state machine.
using model_actor = caf::typed_actor<
    caf::replies_to<msg::model_use>::with<msg::granted>,              // registry: a use; a lease (or error)
    caf::reacts_to<msg::client_use>,                                  // registry: a client's use; answered to it
    caf::replies_to<msg::model_status_request>::with<model_status>,   // registry: the status
    caf::replies_to<msg::unload>::with<void>,  // registry: an operator's unload; device: evicted/replaced
    caf::reacts_to<msg::model_unregister>,     // registry: the registration ended; stop
    caf::replies_to<msg::forget_failure>::with<void>,  // registry: an operator's retry
    caf::reacts_to<msg::file_checked>,         // the offload: its file now, while failing fast
    caf::reacts_to<msg::load_started>,         // loader pool: a worker took the load
    caf::reacts_to<msg::load_failed>,          // loader pool: the load failed for good (for now)
    caf::reacts_to<msg::load_cancelled>,       // loader pool: the load was dropped
    caf::reacts_to<msg::load_done>>;           // device: installed; the slot to serve

// A loader worker (src/actors/loader_pool.cpp): runs one load at a time on its own thread.
using loader_worker_actor = caf::typed_actor<
    caf::replies_to<msg::load_job>::with<msg::load_result>>;  // loader pool: copy a model in

// The loader pool (src/actors/loader_pool.hpp): the load queue, failure records, workers.
using loader_pool_actor = caf::typed_actor<
    caf::reacts_to<msg::enqueue_load>,    // model actor: queue (or promote) its load
    caf::reacts_to<msg::load_waiters>,    // model actor: how many requests wait now (inspection)
    caf::reacts_to<msg::cancel_load>,     // model actor: drop its queued load, forget its failures
    caf::reacts_to<msg::forget_failures>, // model actor: forget its failure records (a retry)
    caf::reacts_to<msg::device_freed>,    // device: room may be free after a refused reservation
    caf::reacts_to<msg::models_lost>,     // device: its process died with these models resident
    caf::reacts_to<msg::attach_devices>,  // runtime: the device actors, once
    caf::reacts_to<msg::inspect_loads>>;  // runtime: queue, running loads, failures, counters

// A device actor (src/actors/device_actor.hpp): resident models, the policy, reservations.
using device_actor = caf::typed_actor<
    caf::replies_to<msg::reserve>::with<msg::reserve_result>,          // loader pool: make room, reserve
    caf::reacts_to<msg::install>,                                     // loader pool: a loaded model
    caf::reacts_to<msg::unload>,                                      // model actor: withdraw its slot
    caf::reacts_to<msg::slot_released>,                               // a slot's last lease (any thread)
    caf::reacts_to<msg::device_changed>,                              // the device itself (any thread)
    caf::replies_to<msg::collect_scores>::with<msg::scores_collected>,  // scorer: the policy's score inputs
    caf::reacts_to<msg::swap_scores>,                                 // scorer: a new importance heap
    caf::reacts_to<msg::inspect_device>,                              // runtime: device_info
    caf::reacts_to<msg::pin_model>>;                                  // version manager: keep a model resident

// The importance scorer (src/actors/scorer_actor.hpp): rebuilds importance heaps periodically.
using scorer_actor = caf::typed_actor<
    caf::reacts_to<msg::rescore_tick>,     // itself: time to collect and rebuild
    caf::reacts_to<msg::inspect_scorer>>;  // runtime: rebuild count and last duration

// The watch hub (src/actors/watch_hub.hpp): calls listeners on every state change.
using watch_hub_actor = caf::typed_actor<
    caf::reacts_to<msg::state_changed>,    // model actor: a transition
    caf::reacts_to<msg::add_watcher>,      // runtime: a new listener
    caf::reacts_to<msg::remove_watcher>>;  // runtime: drop a listener

// ---- errors between actors -------------------------------------------------------------------

// A warm::error as a caf::error (category "warm"; CAF reserves code 0 for "no error").
inline caf::error to_caf_error(const warm::error& e) {
  return caf::error(static_cast<std::uint8_t>(static_cast<int>(e.code) + 1), caf::atom("warm"),
                    caf::make_message(e.message));
}

// Back again. Any other caf::error (the answering actor stopped, a broken promise) can only
// happen while the runtime stops: `unavailable`.
inline warm::error from_caf_error(const caf::error& e) {
  if (e.category() == caf::atom("warm") && e.code() > 0) {
    std::string message;
    if (e.context().match_elements<std::string>()) message = e.context().get_as<std::string>(0);
    return make_error(static_cast<errc>(e.code() - 1), std::move(message));
  }
  return make_error(errc::unavailable, "the runtime is shutting down (" + caf::to_string(e) + ")");
}

namespace msg {

// A registration: a model id and the generation the registry gave this registration of it.
struct registration {
  std::string id;
  std::uint64_t generation = 0;
  friend bool operator==(const registration& a, const registration& b) {
    return a.generation == b.generation && a.id == b.id;
  }
  friend bool operator!=(const registration& a, const registration& b) { return !(a == b); }
};

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

// A model actor's answer to a use: `acquired` shared, since a lease cannot be copied and CAF
// messages must be copyable. Empty for a proactive use (nothing was waited for).
struct granted {
  std::shared_ptr<acquired> value;
};

// A client's callback carried between actors: called at most once, and answered `unavailable`
// if every copy is dropped uncalled (its message discarded, or its holder stopped with the
// runtime). Copyable, since CAF messages are; the copies share one callback.
template <class T>
class once_callback {
 public:
  once_callback() = default;
  explicit once_callback(std::function<void(expected<T>)> done)
      : state_(done ? std::make_shared<holder>(std::move(done)) : nullptr) {}
  void operator()(expected<T> value) const {
    if (state_) state_->call(std::move(value));
  }

 private:
  struct holder {
    explicit holder(std::function<void(expected<T>)> d) : done(std::move(d)) {}
    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;
    ~holder() {
      if (done) done(make_error(errc::unavailable, "the runtime is shutting down"));
    }
    void call(expected<T> value) {
      if (auto d = std::exchange(done, nullptr)) d(std::move(value));
    }
    std::function<void(expected<T>)> done;
  };
  std::shared_ptr<holder> state_;
};

enum class use_kind {
  wait,       // the caller waits for the model (inference, ensureLoaded --sync)
  proactive,  // load in the background (loadNow, ensureLoaded without waiting)
};

// ---- to the registry (from the runtime: answered through `done`) ------------------------------

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
// answers as soon as the load is queued (with an empty lease). `done` may be empty.
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
// Unloads a model (or a vmodel's active model) and keeps it registered. The registry asks the
// model actor with msg::unload (reason `unload`).
struct unload_model {
  std::string id;
  callback<void> done;
};
// Forgets a model's (or a vmodel's active model's) load failures, so that its next use loads it
// at once instead of failing fast until a record expires. The registry asks the model actor with
// msg::forget_failure.
struct retry_model {
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
// Commits pending registry writes (sent by the registry to itself after a batch of requests).
struct flush_registry {};
// From a describe's worker thread: the description read for registration `who`.
struct description_read {
  registration who;
  std::shared_ptr<const registry_description> read;
};
// From a resolving worker thread: registration `who`'s file resolved and its header checked, or
// why not (the registry's offload reads headers, never the registry itself).
struct model_resolved {
  registration who;
  expected<std::shared_ptr<const model_resolution>> result;
};

// ---- to the registry's store writer -------------------------------------------------------------

// Commit one group of staged changes in one transaction (request; answered `store_committed`).
struct store_commit {
  std::vector<registry_change> changes;
};
// The commit's outcome; after a failure, what the disk holds now (re-read), when it can be read,
// so the registry can make its memory match.
struct store_committed {
  expected<void> result;
  std::optional<registry_contents> disk;
};
// Commit what is left (possibly nothing), then stop: the registry's last words.
struct store_close {
  std::vector<registry_change> changes;
};
// The registry's memory now reflects `update` (registry_storage::seen): sent after every commit
// of changes staged before the registry took it in, and before any staged after.
struct store_seen {
  std::shared_ptr<const registry_update> update;
};
// To the registry, from a shared store's follower: changes other instances made.
struct store_update {
  std::shared_ptr<const registry_update> update;
};

// ---- to a model actor -------------------------------------------------------------------------

// A use (request; answered with `granted` or an error): a lease once loaded, at once when loaded
// or when proactive (then empty).
struct model_use {
  use_kind kind = use_kind::wait;
  timestamp arrival{};
};
// A client's use, forwarded by the registry: the same, but answered to the client's callback
// directly (the registry does not wait for it, and the lease takes no hop back through it).
struct client_use {
  use_kind kind = use_kind::wait;
  timestamp arrival{};
  once_callback<acquired> done;
};
// Request; answered with the model's status.
struct model_status_request {};
// Unregistration: cancel, unload, fail waiters with not_found, then stop.
struct model_unregister {};
// The one unload message, with its reason:
// - to a model actor, reason `unload` (request from the registry, answered with void or an
//   error): an operator's unload; drop the loaded copy (or a queued background load), stay
//   registered. `slot` is empty.
// - to a model actor, reason `capacity` or `replaced` (from a device): the device evicted
//   `slot` (for room, or for a newer registration's copy); it is withdrawn and frees its bytes
//   when quiescent. Ignored unless `slot` is the model's current one.
// - to a device actor, reason `unload` (from a model actor, on an operator's unload or on
//   unregistration): withdraw `slot` of `model`.
struct unload {
  std::string model;
  std::shared_ptr<serving_slot> slot;
  eviction_reason reason = eviction_reason::unload;
};
struct load_started {
  std::string device;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // bytes copied so far (live)
};
// From the device that installed the model: the slot to serve from.
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
  // The model's file as the failed load saw it before reading; absent when no load ran (refused
  // by every device). The model actor compares it with the file now to tell a stale record.
  std::optional<file_seen> file;
  // What the model measured when it loaded but its charge could not be settled (0 otherwise):
  // the model's next load reserves this.
  std::uint64_t measured = 0;
};
// The pool dropped a cancelled load; nothing of it remains.
struct load_cancelled {};

// ---- to the loader pool -----------------------------------------------------------------------

struct enqueue_load {
  registration who;
  model_actor owner;  // where the load's outcome goes
  model_location where;
  std::uint64_t bytes = 0;
  bool waiting = false;
  timestamp when{};  // waiting: the first waiting request's arrival; proactive: the last use
  std::uint32_t waiters = 0;  // requests waiting on the load now (0 when proactive)
};
// More requests wait on a queued load of `who` than it last told: `waiters` now. Only for
// inspection; the queue's order does not change (the first waiter's arrival sets it).
struct load_waiters {
  registration who;
  std::uint32_t waiters = 0;
};
// Cancels `who`'s queued load (answered with load_cancelled; a running load finishes and is
// then unloaded by its owner) and forgets the model's failure records. Sent on an operator's
// unload and, load or not, when the model is unregistered.
struct cancel_load {
  registration who;
};
// Forgets `who`'s failure records (an operator's retry); its queued or running load, if any, goes
// on.
struct forget_failures {
  registration who;
};
// An operator's retry, to a model actor: leave LOADING_FAILED (for NOT_LOADED), forget the error
// and the fail-fast deadline, and have the pool forget the records (msg::forget_failures).
struct forget_failure {};
// The model's file as a look on the offload found it (a use while failing fast asked): if it
// differs from what the failed load saw, the failure is stale and forgotten as a retry's is.
struct file_checked {
  file_seen file;
};
// A device freed bytes (or gained an evictable model) after refusing a reservation.
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
// What a device reported on its own (device::watch): its models lost, its capacity changed, or
// ready again.
struct device_changed {
  device_event event;
};
// The device actors, in the runtime's device order (sent once, right after spawning).
struct attach_devices {
  std::vector<device_actor> devices;
};
struct inspect_loads {
  std::function<void(std::vector<queued_load>, std::vector<running_load>, std::vector<failure_info>,
                     std::uint64_t started, std::uint64_t failed)>
      done;
};

// ---- to a loader worker -----------------------------------------------------------------------

// Request; answered with load_result.
struct load_job {
  std::shared_ptr<device> dev;
  model_location where;
  std::shared_ptr<memory_reservation> reservation;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // the worker's live byte count
};
struct load_result {
  // Set on success. Its charge is settled when it measured no more than was reserved; otherwise
  // its shortfall() is still to be reserved (by the device actor, which may evict for it).
  std::shared_ptr<std::unique_ptr<resident_model>> model;
  warm::error error;
  double seconds = 0;
  file_seen file;  // on failure: the model's file as the worker saw it before the load
};

// ---- to a device actor ------------------------------------------------------------------------

// Request; answered with reserve_result.
struct reserve {
  std::string model;
  std::uint64_t bytes = 0;
  // The rest of a loaded model's measured size: when the models evicted for it are still
  // draining, answered once their bytes are back rather than refused at once.
  bool settle = false;
};
struct reserve_result {
  std::shared_ptr<memory_reservation> reservation;  // set on success
  warm::error error;                                 // else why not
};
struct install {
  std::string model;
  model_actor owner;  // told load_done
  std::shared_ptr<std::unique_ptr<resident_model>> weights;  // its charge settled
  double seconds = 0;
  std::uint64_t predicted = 0;  // the bytes reserved before the load (inspection)
};
struct slot_released {
  std::string model;
  const serving_slot* slot = nullptr;
  serving_slot::event what = serving_slot::event::quiesced;
};
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

// ---- importance scoring (policies with periodic scores, e.g. iam) -----------------------------

// From the scorer (request): the device's policy's score inputs, or an error when its policy
// keeps no scores.
struct collect_scores {};
// The answer: a snapshot of one device's score inputs.
struct scores_collected {
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

}  // namespace msg
}  // namespace warm

// The answer to model_status_request.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::model_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::models_lost)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::device_changed)
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
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::retry_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::describe_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::flush_registry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::description_read)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_resolved)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_commit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_committed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_close)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_seen)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_use)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::client_use)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::granted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_status_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_unregister)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unload)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::forget_failure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::file_checked)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_started)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_failed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_cancelled)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::enqueue_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_waiters)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::cancel_load)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::forget_failures)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::device_freed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::attach_devices)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_loads)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::reserve_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::install)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::slot_released)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_device)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::pin_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::collect_scores)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::scores_collected)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::swap_scores)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::rescore_tick)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_scorer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::state_changed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::add_watcher)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::remove_watcher)
