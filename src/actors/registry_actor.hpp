// The registry actor: the tables of models and vmodels, kept durable in SQLite (registry_store),
// the entry point for every request that names a model or vmodel, and the spawner of model
// actors (lazily, at a model's first use, so an idle registration costs a table row).
//
// It runs detached (its own thread) because it writes to disk. Writes are group-committed: each
// mutating request stages its change and the registry sends itself flush_registry, which arrives
// after every request already in the mailbox; one transaction commits them all and only then are
// their callbacks answered. A registration is therefore acknowledged only once it is durable.
//
// Messages: register_model, unregister_model, use_model, unload_model, describe_model,
// get_status, list_models, set_vmodel, delete_vmodel, get_vmodel_status, inspect_models (from
// clients); vmodel_target_ready and flush_registry (from itself and from model actors' callbacks).
#pragma once

#include <caf/actor.hpp>

#include <memory>

#include "runtime/route_table.hpp"
#include "storage/registry_store.hpp"
#include "warm/clock.hpp"
#include "warm/metrics.hpp"
#include "warm/model_repository.hpp"

namespace warm {

struct registry_config {
  std::unique_ptr<registry_store> store;
  std::shared_ptr<const model_repository> repository;
  caf::actor pool;
  caf::actor hub;  // model actors report state changes there
  std::shared_ptr<route_table> routes;
  std::shared_ptr<const clock> time;
  std::uint64_t max_models = 1'000'000;
  std::shared_ptr<runtime_metrics> metrics;  // registered-model gauges (may be null)
};

// Spawns the registry, which first loads every stored model and vmodel.
caf::actor spawn_registry(caf::actor_system& system, registry_config config);

// An id names a model or vmodel: 1..256 bytes of printable ASCII without spaces or '/'.
expected<void> check_id(const std::string& id, const char* what);

}  // namespace warm
