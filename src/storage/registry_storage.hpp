// What the registry keeps and the interface of where it keeps it: the records of models and
// vmodels, a batch of changes to them, and registry_storage, which a store implements. SQLite
// (registry_store.hpp) is the default; a cluster keeps its registry in etcd
// (cluster/etcd_registry.hpp), shared by every instance. Pure storage, no CAF.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "warm/batching.hpp"
#include "warm/error.hpp"

namespace warm {

// A registered model.
struct model_record {
  std::string id;
  std::string path;  // as the user gave it, relative to a repository root
  std::optional<std::uint64_t> version;
  std::optional<std::uint64_t> size_hint;    // bytes
  bool auto_delete = false;                  // unregister when no vmodel references it any more
  std::optional<batching_options> batching;  // the model's own; default: the runtime's

  // Field-wise.
  bool operator==(const model_record& other) const {
    return id == other.id && path == other.path && version == other.version &&
           size_hint == other.size_hint && auto_delete == other.auto_delete &&
           batching == other.batching;
  }
  bool operator!=(const model_record& other) const { return !(*this == other); }
};

// A virtual model: a stable name whose serving model can be moved to another one.
struct vmodel_record {
  std::string id;
  std::string active;  // model serving now ("" if none yet)
  std::string target;  // model it is moving to (== active when settled)

  // Field-wise.
  bool operator==(const vmodel_record& other) const {
    return id == other.id && active == other.active && target == other.target;
  }
  bool operator!=(const vmodel_record& other) const { return !(*this == other); }
};

// One change in a batch. Puts are upserts (insert, or replace every field of the record with that
// id); erasing an id that is not stored is not an error.
struct put_model {
  model_record record;
  bool operator==(const put_model& o) const { return record == o.record; }
};
struct erase_model {
  std::string id;
  bool operator==(const erase_model& o) const { return id == o.id; }
};
struct put_vmodel {
  vmodel_record record;
  bool operator==(const put_vmodel& o) const { return record == o.record; }
};
struct erase_vmodel {
  std::string id;
  bool operator==(const erase_vmodel& o) const { return id == o.id; }
};
using registry_change = std::variant<put_model, erase_model, put_vmodel, erase_vmodel>;

// Everything stored; each list sorted by id.
struct registry_contents {
  std::vector<model_record> models;
  std::vector<vmodel_record> vmodels;
  // The shared store's revision these contents are as of (0 for a store no one else writes).
  std::int64_t revision = 0;
};

// Changes other writers made to a shared store, as registry_storage::follow delivers them.
struct registry_update {
  // The store's revision after these changes. Updates arrive in increasing revision order.
  std::int64_t revision = 0;
  std::vector<registry_change> changes;  // in order
  std::vector<std::int64_t> revisions;   // each change's own revision (as many as changes)
  // Set, with `changes` empty, when the follower lost track of the changes (etcd compacted the
  // history it had not read yet): everything stored as of `revision`.
  std::optional<registry_contents> reset;
};

// Where the registry is kept. One thread at a time calls load, apply and seen (the registry's
// store writer); follow's sink runs on a thread of the store's.
class registry_storage {
 public:
  virtual ~registry_storage() = default;

  // Everything stored, each list sorted by id; `revision` set by a shared store.
  virtual expected<registry_contents> load() = 0;

  // Applies every change of `batch`, in order, all or none. An empty batch succeeds. A shared
  // store applies it only if no one else changed the records it touches since this store last
  // saw them (its own writes, load(), and the updates passed to seen()); otherwise it fails with
  // errc::unavailable and a message saying so, unless what is stored already equals what the
  // batch would write (two writers registering the same thing both succeed).
  virtual expected<void> apply(const std::vector<registry_change>& batch) = 0;

  // A shared store: from now on calls `sink` with every change others make after `since` (the
  // revision of the contents the caller loaded), in revision order, never with this store's own
  // writes, until the store is destroyed. Stores no one else writes ignore it.
  virtual void follow(std::int64_t since, std::function<void(registry_update)> sink) {
    (void)since;
    (void)sink;
  }

  // The caller's memory now reflects `update` (one follow delivered): later applies compare with
  // it. Updates older than the last load() are ignored.
  virtual void seen(const registry_update& update) { (void)update; }

  // Where the registry is kept, for logs and errors ("/var/lib/warm/registry.db", "etcd ...").
  virtual std::string where() const = 0;
};

}  // namespace warm
