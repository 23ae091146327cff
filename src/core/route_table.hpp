// The hit path's index: which loaded slot serves a model id, and which model a vmodel id names.
//
// Each model id has a stable entry whose slot pointer changes atomically, so a load or an
// eviction touches that one entry. The set of entries and the vmodel aliases form an immutable
// snapshot published copy-on-write; it changes only when a model id gets its first entry, when
// aliases change, and when empty entries are compacted away (amortized: at most once per as many
// empty entries as remain). A snapshot is shard_count shards of entries and as many of aliases,
// by the id's hash: a change copies the one shard it touches (and the shards' pointers), so a
// vmodel flip among 25,000 vmodels copies a few hundred aliases, not all of them. Each reader
// thread keeps the snapshot it last saw until the version changes, so a lookup is one atomic
// load and a hash lookup.
//
// A slot unlinked from its entry (eviction, replacement) is not released by the table at once: a
// reader may have read the pointer just before, and a lease it took must be able to end on the
// slot. Readers hold a read_guard while they use slots read from the table: it announces a
// process-wide epoch (one store to a line of the thread's own), and the table keeps an unlinked
// slot until no guard that could have seen it is left, then drops its reference. Writers (model
// actors on load and unload, the registry on vmodel flips) serialize on a mutex that guards only
// their own short edits.
//
// A lease may name a slot withdrawn since the lookup: the slot itself refuses it, and the caller
// takes the slow path. The table never keeps weights alive (a withdrawn slot frees them).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/serving_slot.hpp"

namespace warm {

class route_table {
 public:
  route_table();
  ~route_table();
  route_table(const route_table&) = delete;
  route_table& operator=(const route_table&) = delete;

  // While one lives on a thread, every slot that thread read from any table stays alive: the
  // guard must outlive the leases taken under it (release them, or share() the slot before
  // handing a lease to another thread). Guards nest; destroy one on the thread that made it.
  class read_guard {
   public:
    read_guard();
    ~read_guard();
    read_guard(const read_guard&) = delete;
    read_guard& operator=(const read_guard&) = delete;
  };

  // A lease on the slot serving `id` (a model id, or a vmodel id resolved to its active model),
  // taken with serving_slot::try_acquire(now); empty when no loaded slot serves it or the slot
  // refused (withdrawn). Its slot's model() is the model the id resolved to. Call it with a
  // read_guard alive on this thread. Lock-free.
  serving_slot::lease lease(const std::string& id, timestamp now) const;

  // The model id `id` names now: a vmodel's active model, or `id` itself.
  std::string resolve(const std::string& id) const;

  // Every slot the table routes to now (for shutdown, which withdraws them).
  std::vector<std::shared_ptr<serving_slot>> slots() const;

  void put_slot(const std::string& model, std::shared_ptr<serving_slot> slot);
  // Removes the model's slot if it is still `slot` (a newer load may have replaced it).
  void erase_slot(const std::string& model, const serving_slot* slot);
  void put_alias(const std::string& vmodel, const std::string& model);
  void erase_alias(const std::string& vmodel);
  // Replaces every alias at once, in one published snapshot (a registry reload: n vmodels cost
  // one copy of the table, not n).
  void replace_aliases(std::unordered_map<std::string, std::string> aliases);

  // For tests and inspection: snapshots published so far (a load of a model that has had an
  // entry publishes none), entries held, vmodel aliases held, and unlinked slots not yet released.
  std::uint64_t publications() const { return version_.load(std::memory_order_relaxed); }
  std::size_t entries() const;
  std::size_t aliases() const;
  std::size_t retired() const;
  // Ids (entries and aliases) copied into new shards by every publication so far.
  std::uint64_t copied() const { return copied_.load(std::memory_order_relaxed); }

  struct entry {
    std::atomic<serving_slot*> slot{nullptr};  // read by the hit path
    std::shared_ptr<serving_slot> owner;       // keeps `slot` alive; guarded by writers_
  };
  static constexpr std::size_t shard_count = 64;
  using entry_shard =
      std::unordered_map<std::string, std::shared_ptr<entry>>;       // model id → its entry
  using alias_shard = std::unordered_map<std::string, std::string>;  // vmodel id → model id
  struct snapshot {
    std::array<std::shared_ptr<const entry_shard>, shard_count> entries;
    std::array<std::shared_ptr<const alias_shard>, shard_count> aliases;
  };
  // The shard of `id` (a model or vmodel id).
  static std::size_t shard_of(const std::string& id) {
    return std::hash<std::string>{}(id) % shard_count;
  }

 private:
  struct retired_slot {
    std::shared_ptr<serving_slot> slot;
    std::uint64_t epoch;  // the epoch at which it was unlinked
  };

  // The current snapshot, cached per thread (one atomic load when nothing changed).
  const snapshot& current() const;

  // Publishes a copy of the snapshot edited by `edit`; the caller holds writers_. `edit` replaces
  // the shards it changes (copies of them: published shards are never changed).
  template <class Edit>
  void publish(Edit&& edit);
  // The same, for one id's shard of entries or of aliases, edited in a copy.
  template <class Edit>
  void publish_entries(const std::string& model, Edit&& edit);
  template <class Edit>
  void publish_aliases(const std::string& vmodel, Edit&& edit);
  // Entries, all shards (writers_ held).
  std::size_t entry_count() const;
  // Unlinks the entry's slot (the caller holds writers_) and keeps it until it is safe to drop.
  void retire(entry& e);
  // Drops the retired slots no guard can still reach.
  void reclaim();
  // Publishes a snapshot without empty entries once they are as many as the others.
  void compact_if_sparse();

  const std::uint64_t instance_;  // distinguishes tables in one process for the thread caches
  std::atomic<std::uint64_t> version_{1};
  std::atomic<std::uint64_t> copied_{0};
  std::shared_ptr<const snapshot> published_;
  mutable std::mutex writers_;
  std::vector<retired_slot> retired_;  // guarded by writers_
  std::size_t empty_entries_ = 0;      // guarded by writers_
};

}  // namespace warm
