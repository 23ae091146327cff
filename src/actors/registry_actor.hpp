// The registry actor: the tables of models and vmodels, kept durable in SQLite (registry_store),
// the entry point for every request that names a model or vmodel, and the spawner of model
// actors (lazily, at a model's first use, so an idle registration costs a table row).
//
// It never waits on a file or the disk: it routes every miss, so a commit or a header read must
// not hold one up. It still has a thread of its own (spawned detached): every status and miss
// goes through it, and on its own thread it answers a status in half the p99 it takes on the
// shared scheduler (warm-bench registry: docs/benchmarks.md).
//  - Writes are group-committed by its store writer (registry_writer.hpp, detached). Each
//    mutating request changes memory, stages its change, and the registry sends itself
//    flush_registry, which arrives after every request already in the mailbox; the staged
//    changes go to the writer as one commit, and only when it answers are their callbacks
//    answered. While a commit is in flight, new changes wait and go together as the next one. A
//    registration is therefore acknowledged only once it is durable. After a failed commit the
//    registry takes in what the writer re-read from the disk, failing the requests staged since.
//  - Header reads run on registry_config::offload: resolving a registration's file (before it
//    enters the tables; an identical registration meanwhile joins it), resolving a stored model
//    at its first use or status after a restart (once, however many ask meanwhile:
//    model_resolved), and describe_model. Descriptions are kept per model with the identity of
//    the file they were read from (device, inode, size, mtime): a describe of an unchanged file
//    opens it and answers from memory; a changed one is parsed again.
//
// Interface: warm::registry_actor (actors/protocol/forward.hpp); its messages:
// actors/protocol/registry_protocol.hpp. Those from the runtime are answered through their
// callbacks; flush_registry comes from itself, description_read and model_resolved from the
// offload.
// Whatever it needs from a model actor (a use, a status, an unload) it requests and handles the
// CAF response (`request(...).then`); a client callback still waiting when the registry stops is
// answered `unavailable`.
//
// Every registration of an id gets a new generation (a registry-wide counter, so a later
// registration's is always larger); its model actor and the loader pool name it {id, generation}.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "actors/protocol/forward.hpp"
#include "actors/protocol/tier_protocol.hpp"
#include "core/model_id.hpp"
#include "core/route_table.hpp"
#include "storage/registry_storage.hpp"
#include "warm/clock.hpp"
#include "warm/metrics.hpp"
#include "warm/model_repository.hpp"

namespace warm {

struct registry_config {
  // Handed to the registry's writer. A shared store (etcd) also brings others' changes, which
  // the registry takes in as they come (registry_storage::follow).
  std::unique_ptr<registry_storage> store;
  std::shared_ptr<const model_repository> repository;
  // Models from remote sources: a registration's path that is an object URL, or that no local
  // root holds, resolved to a pinned copy in the disk tier (fetched when the tier lacks it).
  // Blocks: runs on `offload`. Empty: remote paths are refused.
  std::function<expected<tier_copy>(const std::string& path, std::optional<std::uint64_t> version)>
      locate_remote;
  loader_pool_actor pool;
  watch_hub_actor hub;  // model actors report state changes there
  std::shared_ptr<route_table> routes;
  std::shared_ptr<const clock> time;
  std::uint64_t max_models =
      1'000'000;  // models + vmodels held at most (capacity_exhausted past it)
  std::shared_ptr<runtime_metrics> metrics;  // registered-model gauges (may be null)
  // What `store` held when opened (the caller's load(), so that a store that cannot be read stops
  // the start instead of starting empty); when absent the registry loads it itself.
  std::optional<registry_contents> initial;
  // Runs a task on another thread, in any order: where the registry's file work runs (resolving a
  // model file and checking its header; a describe's open and, when the file changed, parse), so
  // that no file holds up the registry. Empty: the registry runs it inline (tests). The model
  // actors it spawns get it too, to look at a failed model's file (model_actor_config::offload;
  // empty there: no looks, a failure lasts until it expires or is retried).
  std::function<void(std::function<void()>)> offload;
  // Told each model's own batching options whenever the registry's tables take a model in (with
  // its record's options, empty for none) or drop one (empty), on the registry's thread: it must
  // only record them. May be empty.
  std::function<void(const std::string& model, const std::optional<batching_options>&)> on_batching;
};

// Spawns the registry and its store writer; the registry first takes in every stored model and
// vmodel (`initial`, else read from the store here, on the caller's thread).
registry_actor spawn_registry(caf::actor_system& system, registry_config config);

}  // namespace warm
