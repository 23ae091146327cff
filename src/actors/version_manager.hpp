// The version manager: serves models whose versions come from directories (warm/versions.hpp),
// as TensorFlow Serving's AspiredVersionsManager does, on top of warm's registry and cache.
//
// For each served model it looks at the model's directory every poll period (a directory in S3
// is listed: config.look_remote; it has no watch), and at once when
// the directory watch reports a change in it (on the offload: a look lists directories and stats
// files; a version still settling is looked at again when it may have settled), takes versions once
// they have settled (core/version_settler.hpp), aspires to those its version policy selects plus
// those a label names, and carries out the aspired-versions rules (core/version_rules.hpp) one step
// at a time:
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
// Interface: version_manager_actor (actors/protocol/forward.hpp); its messages are in
// actors/protocol/version_manager_protocol.hpp. serve_models and served_status come from the
// runtime and are answered through their callbacks; the offload sends its looks; the rest are its
// own timers. What it needs from the registry it requests (msg::ask) and handles the response.
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/protocol/forward.hpp"
#include "actors/protocol/version_manager_protocol.hpp"
#include "storage/dir_watch.hpp"
#include "warm/clock.hpp"
#include "warm/metrics.hpp"
#include "warm/model_repository.hpp"
#include "warm/versions.hpp"

namespace warm {

struct version_manager_config {
  registry_actor registry;
  std::vector<device_actor> devices;  // told which default version to keep resident during a roll
  std::shared_ptr<const model_repository> repository;
  std::shared_ptr<const clock> time;
  // Runs a look at a directory off the actor's threads (the runtime's describer thread).
  std::function<void(std::function<void()>)> offload;
  // Counts served_models, version_load_failures, version_rolls, version_source_errors (may be
  // null).
  std::shared_ptr<runtime_metrics> metrics;
  // Wakes the manager when a served model's directory changes (may be null: polling alone). The
  // offload registers each model's directory with it at every look.
  std::shared_ptr<dir_watch> watcher;
  // Looks at a model directory in a remote store (sources/remote_versions.hpp: an s3:// base
  // path, or a relative one that no local root holds), on the offload like a local look; blocks
  // on the network. Null: no remote sources (such a base path is then an error at its look).
  std::function<expected<std::vector<version_file>>(const std::string& base)> look_remote;
  // Runs a look that may list a remote store (a base path that is a URL, or one no local root
  // holds) off the actor's threads; null: such looks run on `offload` too.
  std::function<void(std::function<void()>)> offload_remote;
  std::chrono::nanoseconds poll = std::chrono::seconds(1);    // between looks at a directory
  std::chrono::nanoseconds settle = std::chrono::seconds(1);  // version_settler's rule
  std::chrono::nanoseconds retry_min =
      std::chrono::seconds(1);  // first back-off after a failed load
  std::chrono::nanoseconds retry_max = std::chrono::minutes(1);  // the back-off's cap
};

version_manager_actor spawn_version_manager(caf::actor_system& system,
                                            version_manager_config config);

}  // namespace warm
