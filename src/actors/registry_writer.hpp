// The registry's store writer: the one actor that waits on the registry's store (SQLite, or etcd
// in a cluster). It owns the store and commits each group of changes the registry sends it in one
// transaction, so the registry, which routes every miss, never waits on a commit (or an fsync)
// itself.
//
// Interface: warm::registry_writer_actor (warm/caf/messages.hpp).
//  - store_commit (request): applies the changes; answers store_committed with the result and,
//    after a failure, what the disk holds (re-read, when it can be), so the registry can make its
//    memory match the disk.
//  - store_close: applies the changes (if any), then stops. The registry sends it as it stops;
//    commits requested earlier are applied first (one sender's messages arrive in order).
//  - store_seen: tells a shared store which of others' changes the registry has taken in
//    (registry_storage::seen), in order with the commits.
//
// Spawned detached: a commit blocks its thread until SQLite has synced (or for up to
// registry_store::busy_timeout while another connection holds a lock), or etcd has answered.
#pragma once

#include <caf/fwd.hpp>

#include <memory>

#include "storage/registry_storage.hpp"
#include "warm/caf/messages.hpp"

namespace warm {

registry_writer_actor spawn_registry_writer(caf::actor_system& system, std::unique_ptr<registry_storage> store);

}  // namespace warm
