#include "core/route_table.hpp"

#include <vector>

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

}  // namespace

route_table::route_table() : instance_(next_instance.fetch_add(1)), published_(std::make_shared<snapshot>()) {}

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

serving_slot* route_table::find(const snapshot& s, const std::string& id, const std::string** model_id) {
  const std::string* model = &id;
  if (auto a = s.aliases.find(id); a != s.aliases.end()) model = &a->second;
  if (model_id) *model_id = model;
  auto it = s.slots.find(*model);
  return it == s.slots.end() ? nullptr : it->second.get();
}

template <class Edit>
void route_table::update(Edit&& edit) {
  std::lock_guard<std::mutex> guard(writers_);
  auto next = std::make_shared<snapshot>(*std::atomic_load(&published_));
  edit(*next);
  std::atomic_store(&published_, std::shared_ptr<const snapshot>(std::move(next)));
  version_.fetch_add(1, std::memory_order_release);
}

void route_table::put_slot(const std::string& model, std::shared_ptr<serving_slot> slot) {
  update([&](snapshot& s) { s.slots[model] = std::move(slot); });
}

void route_table::erase_slot(const std::string& model, const serving_slot* slot) {
  update([&](snapshot& s) {
    auto it = s.slots.find(model);
    if (it != s.slots.end() && it->second.get() == slot) s.slots.erase(it);
  });
}

void route_table::put_alias(const std::string& vmodel, const std::string& model) {
  update([&](snapshot& s) { s.aliases[vmodel] = model; });
}

void route_table::erase_alias(const std::string& vmodel) {
  update([&](snapshot& s) { s.aliases.erase(vmodel); });
}

void route_table::replace_aliases(std::unordered_map<std::string, std::string> aliases) {
  update([&](snapshot& s) { s.aliases = std::move(aliases); });
}

}  // namespace warm
