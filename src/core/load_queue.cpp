#include "core/load_queue.hpp"

namespace warm {

load_queue::key load_queue::make_key(const entry& e) {
  auto ticks = [](timestamp t) { return static_cast<std::int64_t>(t.time_since_epoch().count()); };
  if (e.kind == priority::waiting) return {0, ticks(e.first_wait), sequence_++};
  return {1, -ticks(e.last_used), sequence_++};
}

void load_queue::insert(entry e) {
  auto order = make_key(e);
  order_.emplace(order, e.model);
  auto name = e.model;
  index_.insert_or_assign(std::move(name), slot{order, std::move(e)});
}

load_queue::entry load_queue::erase(std::unordered_map<std::string, slot>::iterator it) {
  order_.erase({it->second.order, it->first});
  entry e = std::move(it->second.value);
  index_.erase(it);
  return e;
}

bool load_queue::push_waiting(const std::string& model, timestamp arrival) {
  auto it = index_.find(model);
  if (it == index_.end()) {
    insert(entry{model, priority::waiting, arrival, {}});
    return true;
  }
  entry current = it->second.value;
  if (current.kind == priority::waiting && current.first_wait <= arrival) return false;
  erase(it);
  current.first_wait =
      current.kind == priority::waiting ? std::min(current.first_wait, arrival) : arrival;
  current.kind = priority::waiting;
  insert(std::move(current));
  return false;
}

bool load_queue::push_proactive(const std::string& model, timestamp last_used) {
  auto it = index_.find(model);
  if (it == index_.end()) {
    insert(entry{model, priority::proactive, {}, last_used});
    return true;
  }
  entry current = it->second.value;
  if (last_used <= current.last_used) return false;
  current.last_used = last_used;
  if (current.kind == priority::waiting) {  // order of waiting loads ignores last use
    it->second.value.last_used = last_used;
    return false;
  }
  erase(it);
  insert(std::move(current));
  return false;
}

bool load_queue::cancel(const std::string& model) {
  auto it = index_.find(model);
  if (it == index_.end()) return false;
  erase(it);
  return true;
}

std::optional<load_queue::entry> load_queue::pop() {
  return pop_first([](const entry&) { return true; });
}

std::optional<load_queue::entry> load_queue::pop_first(
    const std::function<bool(const entry&)>& ready) {
  for (const auto& [order, model] : order_) {
    auto it = index_.find(model);
    if (ready(it->second.value)) return erase(it);
  }
  return std::nullopt;
}

const load_queue::entry* load_queue::find(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? nullptr : &it->second.value;
}

std::vector<load_queue::entry> load_queue::snapshot() const {
  std::vector<entry> out;
  out.reserve(index_.size());
  for (const auto& [order, model] : order_)
    out.push_back(index_.at(model).value);
  return out;
}

}  // namespace warm
