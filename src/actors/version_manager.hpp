// The version manager: serves models whose versions come from directories (warm/versions.hpp),
// as TensorFlow Serving's AspiredVersionsManager does, on top of warm's registry and cache.
//
// For each served model it looks at the model's directory every poll period, and at once when
// the directory watch reports a change in it (on the offload: a look lists directories and stats
// files; a version still settling is looked at again when it may have settled), takes versions once they have settled
// (core/version_settler.hpp), aspires to those its version policy selects plus those a label
// names, and carries out the aspired-versions rules (core/version_rules.hpp) one step at a time:
//  - load v: registers `m@v` (path `<base>/<v>`) with the registry, then uses it and waits for
//    its load. A failed load is unregistered and retried after a back-off (1 s, doubling, at most
//    a minute); the versions that serve meanwhile keep serving.
//  - unload v: unregisters `m@v` (requests in flight on it finish first; the registry unloads it).
//    Never while an alias names it: the alias moves first.
// While a version loads, the version the name serves is pinned on every device (msg::pin_model),
// so that making room for the new version cannot evict the one that serves; the pin goes when
// nothing loads any more.
// The model's name is a vmodel for its default version (core/version_rules.hpp default_version),
// each label `m@label` a vmodel for its version once that version is ready; moving an alias is a
// vmodel retarget, atomic for requests. Aliases of one model move one at a time.
//
// State that outlives the process lives in the registry (its versions and aliases are ordinary
// registrations): when a served model is first applied, the manager adopts the versions and
// aliases a previous run registered, as ready, so a restart serves at once and then rolls forward.
//
// Interface: version_manager_actor (below). serve_models and served_status come from the runtime
// and are answered through their callbacks; the rest it sends itself (timers, and the answers of
// the registry and the offload, which arrive on their threads and are turned into messages).
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/dir_watch.hpp"
#include "warm/caf/messages.hpp"
#include "warm/clock.hpp"
#include "warm/model_repository.hpp"
#include "warm/versions.hpp"

namespace warm {

namespace msg {

// Runtime: replace the served models with `config` (checked whole first: a refused one changes
// nothing). Answered once applied (their versions load afterwards).
struct serve_models {
  served_models_config config;
  callback<void> done;
};
// Runtime: every served model's status, by name.
struct served_status {
  callback<std::vector<served_model_status>> done;
};
// Itself: time to look at every served model's directory.
struct poll_versions {};
// The directory watch (or its own timer while a version settles): look at `model` now.
struct look_now {
  std::string model;
};
// The offload: what one look at a served model's directory found.
struct versions_seen {
  std::string model;
  std::uint64_t generation = 0;  // the served model's entry it was made for
  expected<std::vector<version_file>> look{std::vector<version_file>{}};
  std::chrono::nanoseconds now{};
  std::int64_t wall_now_ns = 0;
};
// The registry's answers, and its own timers, for one served model: whatever they are, the
// manager updates the model and takes its next steps.
struct version_event {
  enum class kind { registered, loaded, unloaded, alias_set, alias_check, alias_recheck, adopted, retry };
  kind what = kind::retry;
  std::string model;
  std::uint64_t generation = 0;
  std::uint64_t version = 0;               // registered, loaded, unloaded
  std::string alias;                       // alias_set, alias_check: the vmodel
  std::optional<std::uint64_t> target;     // alias_set, alias_check: its version (none: deleted)
  expected<void> result;                   // registered, loaded, unloaded, alias_set
  std::optional<vmodel_status> alias_status;     // alias_set, alias_check: as the registry answered
  std::vector<std::string> registered;           // adopted: ids "m@..." registered now
  std::vector<vmodel_status> aliases;            // adopted: the model's vmodels (name, labels)
};

}  // namespace msg

using version_manager_actor = caf::typed_actor<
    caf::reacts_to<msg::serve_models>,     // runtime: apply a configuration
    caf::reacts_to<msg::served_status>,    // runtime: status
    caf::reacts_to<msg::poll_versions>,    // itself: the poll timer
    caf::reacts_to<msg::look_now>,         // the directory watch, or itself: look at one model now
    caf::reacts_to<msg::versions_seen>,    // the offload: a look's result
    caf::reacts_to<msg::version_event>>;   // registry answers and timers, as events

struct version_manager_config {
  registry_actor registry;
  std::vector<device_actor> devices;  // told which default version to keep resident during a roll
  std::shared_ptr<const model_repository> repository;
  std::shared_ptr<const clock> time;
  // Runs a look at a directory off the actor's threads (the runtime's describer thread).
  std::function<void(std::function<void()>)> offload;
  std::shared_ptr<runtime_metrics> metrics;
  // Wakes the manager when a served model's directory changes (may be null: polling alone). The
  // offload registers each model's directory with it at every look.
  std::shared_ptr<dir_watch> watcher;  // served_models, version_load_failures, version_rolls (may be null)
  std::chrono::nanoseconds poll = std::chrono::seconds(1);    // between looks at a directory
  std::chrono::nanoseconds settle = std::chrono::seconds(1);  // version_settler's rule
  std::chrono::nanoseconds retry_min = std::chrono::seconds(1);  // first back-off after a failed load
  std::chrono::nanoseconds retry_max = std::chrono::minutes(1);  // the back-off's cap
};

version_manager_actor spawn_version_manager(caf::actor_system& system, version_manager_config config);

}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::serve_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::served_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::poll_versions)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::look_now)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::versions_seen)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::version_event)
