#include "core/route_table.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

namespace warm {
namespace {

std::atomic<std::uint64_t> next_instance{1};

// The snapshots this thread last read, by table instance. A thread rarely talks to more than one
// runtime, so a short vector beats a map.
struct cached_snapshot {
  std::uint64_t instance = 0;
  std::uint64_t version = 0;
  std::shared_ptr<const route_table::snapshot> value;
};
thread_local std::vector<cached_snapshot> thread_cache;

// ---- epochs: when may an unlinked slot be released? -----------------------------------------
//
// A reader (read_guard) stores the global epoch into its own record before it reads any entry's
// slot pointer and clears it once it is done with every slot it read (its leases released); a
// writer unlinks a slot, then takes an epoch R (fetch_add) and later scans the records. All four
// are sequentially consistent, so for every reader either its read of the entry comes after the
// unlink (it cannot see the slot), or the scan sees its announcement, which is then at most R. A
// slot unlinked at R is therefore unreachable once every announcement is 0 or greater than R.

struct reader_record {
  std::atomic<std::uint64_t> announced{0};  // 0: not reading an entry
  std::atomic<bool> taken{false};           // owned by a live thread
  reader_record* next = nullptr;            // immutable once published
};

std::atomic<std::uint64_t> global_epoch{1};
std::atomic<reader_record*> records{
    nullptr};  // a list that only grows: one record per thread alive at once

reader_record* take_record() {
  for (auto* r = records.load(std::memory_order_acquire); r; r = r->next) {
    bool free = false;
    if (!r->taken.load(std::memory_order_relaxed) && r->taken.compare_exchange_strong(free, true))
      return r;
  }
  auto* r = new reader_record;  // never freed: records are reused by later threads
  r->taken.store(true, std::memory_order_relaxed);
  r->next = records.load(std::memory_order_relaxed);
  while (!records.compare_exchange_weak(r->next, r)) {
  }
  return r;
}

// This thread's record, taken at its first guard and given back when it exits.
struct thread_reader {
  reader_record* record = take_record();
  int depth = 0;  // read_guards alive on this thread
  ~thread_reader() {
    record->announced.store(0);
    record->taken.store(false, std::memory_order_release);
  }
};
thread_local thread_reader this_reader;

// The smallest announcement of a reader in an entry now; the maximum when none is.
std::uint64_t oldest_reader() {
  auto oldest = std::numeric_limits<std::uint64_t>::max();
  for (auto* r = records.load(); r; r = r->next) {
    auto announced = r->announced.load();
    if (announced != 0) oldest = std::min(oldest, announced);
  }
  return oldest;
}

}  // namespace

route_table::route_table() : instance_(next_instance.fetch_add(1)) {
  auto empty = std::make_shared<snapshot>();
  auto no_entries = std::make_shared<const entry_shard>();
  auto no_aliases = std::make_shared<const alias_shard>();
  empty->entries.fill(no_entries);
  empty->aliases.fill(no_aliases);
  published_ = std::move(empty);
}

route_table::~route_table() = default;  // no reader may be inside a table being destroyed

const route_table::snapshot& route_table::current() const {
  cached_snapshot* cached = nullptr;
  for (auto& c : thread_cache)
    if (c.instance == instance_) cached = &c;
  if (!cached) {
    if (thread_cache.size() >= 8) thread_cache.clear();  // tables of runtimes long gone
    thread_cache.push_back({instance_, 0, nullptr});
    cached = &thread_cache.back();
  }
  auto version = version_.load(std::memory_order_acquire);
  if (cached->version != version) {
    // Version first, then the pointer: a writer publishes the pointer before bumping the version,
    // so this snapshot is at least as new as `version`.
    cached->value = std::atomic_load(&published_);
    cached->version = version;
  }
  return *cached->value;
}

serving_slot::lease route_table::lease(const std::string& id, timestamp now) const {
  const auto& s = current();
  const std::string* model = &id;
  const auto& aliases = *s.aliases[shard_of(id)];
  if (auto a = aliases.find(id); a != aliases.end()) model = &a->second;
  const auto& entries = *s.entries[shard_of(*model)];
  auto it = entries.find(*model);
  if (it == entries.end()) return {};
  assert(this_reader.depth > 0 && "route_table::lease needs a read_guard on this thread");
  auto* slot = it->second->slot.load();
  return slot ? slot->try_acquire(now) : serving_slot::lease{};
}

route_table::read_guard::read_guard() {
  if (this_reader.depth++ == 0) this_reader.record->announced.store(global_epoch.load());
}

route_table::read_guard::~read_guard() {
  if (--this_reader.depth == 0) this_reader.record->announced.store(0, std::memory_order_release);
}

std::string route_table::resolve(const std::string& id) const {
  const auto& aliases = *current().aliases[shard_of(id)];
  auto a = aliases.find(id);
  return a == aliases.end() ? id : a->second;
}

std::vector<std::shared_ptr<serving_slot>> route_table::slots() const {
  std::lock_guard<std::mutex> guard(writers_);
  std::vector<std::shared_ptr<serving_slot>> out;
  for (const auto& shard : std::atomic_load(&published_)->entries)
    for (auto& [model, e] : *shard)
      if (e->owner) out.push_back(e->owner);
  return out;
}

std::size_t route_table::entry_count() const {
  std::size_t n = 0;
  for (const auto& shard : std::atomic_load(&published_)->entries)
    n += shard->size();
  return n;
}

std::size_t route_table::entries() const {
  std::lock_guard<std::mutex> guard(writers_);
  return entry_count();
}

std::size_t route_table::aliases() const {
  std::lock_guard<std::mutex> guard(writers_);
  std::size_t n = 0;
  for (const auto& shard : std::atomic_load(&published_)->aliases)
    n += shard->size();
  return n;
}

std::size_t route_table::retired() const {
  std::lock_guard<std::mutex> guard(writers_);
  return retired_.size();
}

template <class Edit>
void route_table::publish(Edit&& edit) {
  auto next = std::make_shared<snapshot>(*std::atomic_load(&published_));
  edit(*next);
  std::atomic_store(&published_, std::shared_ptr<const snapshot>(std::move(next)));
  version_.fetch_add(1, std::memory_order_release);
}

template <class Edit>
void route_table::publish_entries(const std::string& model, Edit&& edit) {
  publish([&](snapshot& s) {
    auto& shard = s.entries[shard_of(model)];
    auto copy = std::make_shared<entry_shard>(*shard);
    copied_.fetch_add(copy->size(), std::memory_order_relaxed);
    edit(*copy);
    shard = std::move(copy);
  });
}

template <class Edit>
void route_table::publish_aliases(const std::string& vmodel, Edit&& edit) {
  publish([&](snapshot& s) {
    auto& shard = s.aliases[shard_of(vmodel)];
    auto copy = std::make_shared<alias_shard>(*shard);
    copied_.fetch_add(copy->size(), std::memory_order_relaxed);
    edit(*copy);
    shard = std::move(copy);
  });
}

void route_table::retire(entry& e) {
  e.slot.store(nullptr);
  if (!e.owner) return;
  retired_.push_back({std::move(e.owner), global_epoch.fetch_add(1)});
  e.owner = nullptr;
  ++empty_entries_;
}

void route_table::reclaim() {
  if (retired_.empty()) return;
  auto oldest = oldest_reader();
  auto unreachable = [&](const retired_slot& r) { return r.epoch < oldest; };
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(), unreachable), retired_.end());
}

void route_table::compact_if_sparse() {
  auto total = entry_count();
  if (empty_entries_ < 64 || empty_entries_ * 2 < total) return;
  publish([this](snapshot& s) {
    for (auto& shard : s.entries) {
      auto copy = std::make_shared<entry_shard>(*shard);
      copied_.fetch_add(copy->size(), std::memory_order_relaxed);
      for (auto it = copy->begin(); it != copy->end();)
        it = it->second->owner ? std::next(it) : copy->erase(it);
      shard = std::move(copy);
    }
  });
  empty_entries_ = 0;
}

void route_table::put_slot(const std::string& model, std::shared_ptr<serving_slot> slot) {
  std::lock_guard<std::mutex> guard(writers_);
  auto now = std::atomic_load(&published_);  // only writers publish, and this one holds writers_
  const auto& shard = *now->entries[shard_of(model)];
  std::shared_ptr<entry> e;
  if (auto it = shard.find(model); it != shard.end()) {
    e = it->second;
  } else {
    e = std::make_shared<entry>();
    publish_entries(model, [&](entry_shard& entries) { entries.emplace(model, e); });
    ++empty_entries_;  // counted as filled just below
  }
  retire(*e);
  e->owner = std::move(slot);
  e->slot.store(e->owner.get());
  --empty_entries_;
  reclaim();
}

void route_table::erase_slot(const std::string& model, const serving_slot* slot) {
  std::lock_guard<std::mutex> guard(writers_);
  auto now = std::atomic_load(&published_);
  const auto& shard = *now->entries[shard_of(model)];
  auto it = shard.find(model);
  if (it != shard.end() && it->second->owner && it->second->owner.get() == slot)
    retire(*it->second);
  reclaim();
  compact_if_sparse();
}

void route_table::put_alias(const std::string& vmodel, const std::string& model) {
  std::lock_guard<std::mutex> guard(writers_);
  publish_aliases(vmodel, [&](alias_shard& aliases) { aliases[vmodel] = model; });
}

void route_table::erase_alias(const std::string& vmodel) {
  std::lock_guard<std::mutex> guard(writers_);
  publish_aliases(vmodel, [&](alias_shard& aliases) { aliases.erase(vmodel); });
}

void route_table::replace_aliases(std::unordered_map<std::string, std::string> aliases) {
  std::lock_guard<std::mutex> guard(writers_);
  std::array<std::shared_ptr<alias_shard>, shard_count> shards;
  for (auto& shard : shards)
    shard = std::make_shared<alias_shard>();
  for (auto& [vmodel, model] : aliases)
    shards[shard_of(vmodel)]->emplace(vmodel, std::move(model));
  publish([&](snapshot& s) {
    for (std::size_t i = 0; i < shard_count; ++i)
      s.aliases[i] = std::move(shards[i]);
  });
}

}  // namespace warm
