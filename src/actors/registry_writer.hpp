// The registry's store writer: the one actor that waits on the registry's store (SQLite, or etcd
// in a cluster). It owns the store and commits each group of changes the registry sends it in one
// transaction, so the registry, which routes every miss, never waits on a commit (or an fsync)
// itself.
//
// Interface: warm::registry_writer_actor (actors/protocol/forward.hpp); its messages, all from the
// registry: actors/protocol/registry_writer_protocol.hpp.
//
// Spawned detached: a commit blocks its thread until SQLite has synced (or for up to
// registry_store::busy_timeout while another connection holds a lock), or etcd has answered.
#pragma once

#include <caf/fwd.hpp>

#include <memory>

#include "actors/protocol/forward.hpp"
#include "storage/registry_storage.hpp"

namespace warm {

registry_writer_actor spawn_registry_writer(caf::actor_system& system,
                                            std::unique_ptr<registry_storage> store);

}  // namespace warm
