// What the registry (actors/registry_actor.hpp) is sent: registrations, vmodels and every
// request naming a model, from the runtime's edge (answered through the callback each carries,
// on the registry's thread), and the results of the work it hands to other threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/protocol/common.hpp"
#include "core/lease.hpp"
#include "storage/registry_storage.hpp"
#include "warm/clock.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
struct registry_description;  // a model file's description, kept by the registry (opaque here)
struct model_resolution;      // a model file found beneath its root and its header checked (opaque)

namespace msg {

// From the runtime: register `id` (answered once durable; with `sync`, once loaded or failed).
struct register_model {
  std::string id;
  model_info info;
  bool load_now = false;
  bool sync = false;  // reply once loaded (or failed), not just once durable
  callback<void> done;
};
// From the runtime: unregister `id` (answered once durable; a model a vmodel names is refused).
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
// From the runtime: one model's status, requested from its actor when it has one.
struct get_status {
  std::string id;
  callback<model_status> done;
};
// From the runtime: a page of statuses, in id order.
struct list_models {
  std::string after;        // page start: ids greater than this
  std::uint32_t limit = 0;  // 0 = all
  callback<std::vector<model_status>> done;
};
// From the runtime: create or retarget a vmodel (answered once durable).
struct set_vmodel {
  std::string id;
  std::string target;
  bool auto_delete_target = false;
  std::optional<std::string> expected_target;  // compare-and-set on the current target
  callback<vmodel_status> done;
};
// From the runtime: delete a vmodel (answered once durable).
struct delete_vmodel {
  std::string id;
  callback<void> done;
};
// From the runtime: one vmodel's status.
struct get_vmodel_status {
  std::string id;
  callback<vmodel_status> done;
};
// Unloads a model (or a vmodel's active model) and keeps it registered. The registry asks the
// model actor with msg::unload_loaded.
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
  std::function<void(std::vector<model_status>, std::uint64_t registered, std::uint64_t vmodels)>
      done;
};
// The registered models whose file is at one of `sources` (model_location::source, the URLs of
// the disk tier's files, sorted), each with its source, in the registry's order: what the
// runtime's inspection matches against the tier's files. A registration not resolved yet is left
// out. One pass over the registrations, a lookup in `sources` each.
struct model_sources {
  std::vector<std::string> sources;
  std::function<void(std::vector<std::pair<std::string, std::string>>)> done;
};
// Commits pending registry writes (sent by the registry to itself after a batch of requests).
struct flush_registry {};
// An actor's request of the registry (the version manager's): `request` with its callback left
// empty, answered with a CAF response instead, always from the registry's own thread (a use's
// once the model is loaded, without the lease; a registration cannot be `sync`). The runtime's
// edge sends the message itself, with its callback.
template <class T>
struct ask {
  T request;
};
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
// From a shared store's follower: changes other instances made, taken in once no change staged
// before them is waiting.
struct store_update {
  std::shared_ptr<const registry_update> update;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::register_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unregister_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::use_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::get_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::list_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::set_vmodel)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::delete_vmodel)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::get_vmodel_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unload_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::retry_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::describe_model)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_sources)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::flush_registry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::description_read)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_resolved)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_update)
// The answers to an actor's ask<list_models>, and to ask<set_vmodel> and ask<get_vmodel_status>.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<warm::model_status>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::vmodel_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::register_model>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::unregister_model>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::use_model>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::retry_model>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::list_models>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::set_vmodel>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::delete_vmodel>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::ask<warm::msg::get_vmodel_status>)
