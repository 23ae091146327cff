// Every actor's interface as a caf::typed_actor, over forward-declared messages: enough to hold,
// pass and compare actor handles. Each message is defined, and said what it means, in the
// protocol header of the actor that receives it (<actor>_protocol.hpp beside this one); a file
// that sends or handles a message includes that header.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

namespace warm {

struct model_status;
struct vmodel_status;

namespace msg {

struct registration;
template <class T>
struct ask;
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
struct model_sources;
struct flush_registry;
struct description_read;
struct model_resolved;
struct store_update;
struct store_commit;
struct store_committed;
struct store_close;
struct store_seen;
struct model_use;
struct granted;
struct client_use;
struct model_status_request;
struct unload_loaded;
struct slot_evicted;
struct model_unregister;
struct forget_failure;
struct file_checked;
struct load_started;
struct load_failed;
struct load_cancelled;
struct load_done;
struct load_job;
struct load_result;
struct enqueue_load;
struct load_waiters;
struct cancel_load;
struct forget_failures;
struct device_freed;
struct models_lost;
struct attach_devices;
struct inspect_loads;
struct reserve;
struct reserve_result;
struct install;
struct withdraw_slot;
struct slot_released;
struct device_changed;
struct collect_scores;
struct scores_collected;
struct swap_scores;
struct inspect_device;
struct pin_model;
struct rescore_tick;
struct inspect_scorer;
struct acquire_copy;
struct copy_fetched;
struct release_copy;
struct inspect_tier;
struct state_changed;
struct add_watcher;
struct remove_watcher;

// The version manager's (version_manager_protocol.hpp).
struct serve_models;
struct served_status;
struct poll_versions;
struct look_now;
struct versions_seen;
struct retry_versions;
struct recheck_alias;

}  // namespace msg

// The registry (src/actors/registry_actor.hpp): models, vmodels, and every request naming one.
using registry_actor = caf::typed_actor<
    caf::reacts_to<msg::register_model>,    // runtime: register (answered once durable)
    caf::reacts_to<msg::unregister_model>,  // runtime: unregister (answered once durable)
    caf::reacts_to<msg::use_model>,      // runtime: a miss, or ensureLoaded; forwarded as model_use
    caf::reacts_to<msg::get_status>,     // runtime: one model's status
    caf::reacts_to<msg::list_models>,    // runtime: a page of statuses
    caf::reacts_to<msg::set_vmodel>,     // runtime: create or retarget a vmodel
    caf::reacts_to<msg::delete_vmodel>,  // runtime: delete a vmodel
    caf::reacts_to<msg::get_vmodel_status>,  // runtime: one vmodel's status
    caf::reacts_to<msg::unload_model>,  // runtime: an operator's unload; forwarded as unload_loaded
    caf::reacts_to<msg::retry_model>,   // runtime: forget a model's load failures; forwarded
    caf::reacts_to<msg::describe_model>,    // runtime: a model's metadata from its header
    caf::reacts_to<msg::inspect_models>,    // runtime: statuses of models with an actor, totals
    caf::reacts_to<msg::model_sources>,     // runtime: remote models' URLs (inspection)
    caf::reacts_to<msg::flush_registry>,    // itself: commit the staged writes (group commit)
    caf::reacts_to<msg::description_read>,  // a describe's worker thread: keep its description
    caf::reacts_to<msg::model_resolved>,    // a resolving worker thread: a model file's header
    caf::reacts_to<msg::store_update>,      // a shared store's follower: others' changes
    // An actor's requests (the version manager's), answered as responses from the registry:
    caf::replies_to<msg::ask<msg::register_model>>::with<void>,
    caf::replies_to<msg::ask<msg::unregister_model>>::with<void>,
    caf::replies_to<msg::ask<msg::use_model>>::with<void>,  // once loaded (no lease kept)
    caf::replies_to<msg::ask<msg::retry_model>>::with<void>,
    caf::replies_to<msg::ask<msg::list_models>>::with<std::vector<model_status>>,
    caf::replies_to<msg::ask<msg::set_vmodel>>::with<vmodel_status>,
    caf::replies_to<msg::ask<msg::delete_vmodel>>::with<void>,
    caf::replies_to<msg::ask<msg::get_vmodel_status>>::with<vmodel_status>>;

// The registry's store writer (detached: the only actor that waits on SQLite).
using registry_writer_actor = caf::typed_actor<
    caf::replies_to<msg::store_commit>::with<msg::store_committed>,  // registry: one group commit
    caf::reacts_to<msg::store_close>,  // registry (stopping): last commit, stop
    caf::reacts_to<msg::store_seen>>;  // registry: others' changes taken in

// A model actor (src/actors/model_actor.hpp): one registration's state machine.
using model_actor = caf::typed_actor<
    caf::replies_to<msg::model_use>::with<msg::granted>,  // registry: a use; a lease (or error)
    caf::reacts_to<msg::client_use>,  // registry: a client's use; answered to it
    caf::replies_to<msg::model_status_request>::with<model_status>,  // registry: the status
    caf::replies_to<msg::unload_loaded>::with<void>,  // registry: an operator's unload
    caf::reacts_to<msg::slot_evicted>,      // device: evicted, replaced or lost with its runtime
    caf::reacts_to<msg::model_unregister>,  // registry: the registration ended; stop
    caf::replies_to<msg::forget_failure>::with<void>,  // registry: an operator's retry
    caf::reacts_to<msg::file_checked>,    // the offload: its file now, while failing fast
    caf::reacts_to<msg::load_started>,    // loader pool: a worker took the load
    caf::reacts_to<msg::load_failed>,     // loader pool: the load failed for good (for now)
    caf::reacts_to<msg::load_cancelled>,  // loader pool: the load was dropped
    caf::reacts_to<msg::load_done>>;      // device: installed; the slot to serve

// A loader worker (src/actors/loader_pool.cpp): runs one load at a time on its own thread, asked
// by the loader pool.
using loader_worker_actor =
    caf::typed_actor<caf::replies_to<msg::load_job>::with<msg::load_result>>;

// The loader pool (src/actors/loader_pool.hpp): the load queue, failure records, workers.
using loader_pool_actor = caf::typed_actor<
    caf::reacts_to<msg::enqueue_load>,     // model actor: queue (or promote) its load
    caf::reacts_to<msg::load_waiters>,     // model actor: how many requests wait now (inspection)
    caf::reacts_to<msg::cancel_load>,      // model actor: drop its queued load, forget its failures
    caf::reacts_to<msg::forget_failures>,  // model actor: forget its failure records (a retry)
    caf::reacts_to<msg::device_freed>,     // device: room may be free after a refused reservation
    caf::reacts_to<msg::models_lost>,      // device: its process died with these models resident
    caf::reacts_to<msg::attach_devices>,   // runtime: the device actors, once
    caf::reacts_to<msg::inspect_loads>>;   // runtime: queue, running loads, failures, counters

// A device actor (src/actors/device_actor.hpp): resident models, the policy, reservations.
using device_actor = caf::typed_actor<
    caf::replies_to<msg::reserve>::with<msg::reserve_result>,  // loader pool: make room, reserve
    caf::reacts_to<msg::install>,                              // loader pool: a loaded model
    caf::reacts_to<msg::withdraw_slot>,                        // model actor: withdraw its slot
    caf::reacts_to<msg::slot_released>,                        // a slot's last lease (any thread)
    caf::reacts_to<msg::device_changed>,                       // the device itself (any thread)
    caf::replies_to<msg::collect_scores>::with<msg::scores_collected>,  // scorer: score inputs
    caf::reacts_to<msg::swap_scores>,     // scorer: a new importance heap
    caf::reacts_to<msg::inspect_device>,  // runtime: device_info
    caf::reacts_to<msg::pin_model>>;      // version manager: keep a model resident

// The importance scorer (src/actors/scorer_actor.hpp): rebuilds importance heaps periodically.
using scorer_actor =
    caf::typed_actor<caf::reacts_to<msg::rescore_tick>,     // itself: time to collect and rebuild
                     caf::reacts_to<msg::inspect_scorer>>;  // runtime: rebuild count and last
                                                            // duration

// The watch hub (src/actors/watch_hub.hpp): calls listeners on every state change.
using watch_hub_actor =
    caf::typed_actor<caf::reacts_to<msg::state_changed>,    // model actor: a transition
                     caf::reacts_to<msg::add_watcher>,      // runtime: a new listener
                     caf::reacts_to<msg::remove_watcher>>;  // runtime: drop a listener

// The version manager (actors/version_manager.hpp): serves models' versions from directories.
using version_manager_actor = caf::typed_actor<
    caf::reacts_to<msg::serve_models>,    // runtime: apply a configuration
    caf::reacts_to<msg::served_status>,   // runtime: status
    caf::reacts_to<msg::poll_versions>,   // itself: the poll timer
    caf::reacts_to<msg::look_now>,        // the directory watch, or itself: look at a model now
    caf::reacts_to<msg::versions_seen>,   // the offload: a look's result
    caf::reacts_to<msg::retry_versions>,  // itself: a failed load's back-off is over
    caf::reacts_to<msg::recheck_alias>>;  // itself: ask again where a moving vmodel is

// The disk tier (actors/tier_actor.hpp): local copies of remote model files, one fetch per file.
using tier_actor =
    caf::typed_actor<caf::reacts_to<msg::acquire_copy>,   // registry, loader: a local copy, pinned
                     caf::reacts_to<msg::copy_fetched>,   // a fetch task: its file is written
                     caf::reacts_to<msg::release_copy>,   // a copy's pin dropped (any thread)
                     caf::reacts_to<msg::inspect_tier>>;  // runtime: holdings and totals

}  // namespace warm
