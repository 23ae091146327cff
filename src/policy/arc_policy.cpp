#include "policy/arc_policy.hpp"

#include <algorithm>
#include <unordered_set>

namespace warm {

int arc_policy::where(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? -1 : it->second.in;
}

void arc_policy::push(list_id l, const std::string& model, std::uint64_t bytes) {
  lists_[l].push_front({model, bytes});
  bytes_[l] += bytes;
  index_[model] = {l, lists_[l].begin()};
}

void arc_policy::erase(const std::string& model) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  bytes_[it->second.in] -= it->second.at->bytes;
  lists_[it->second.in].erase(it->second.at);
  index_.erase(it);
}

void arc_policy::trim_ghosts() {
  auto drop_oldest = [&](list_id l) { erase(lists_[l].back().model); };
  while (!lists_[b1].empty() && bytes_[t1] + bytes_[b1] > capacity_)
    drop_oldest(b1);
  while (!lists_[b2].empty() && bytes_[t1] + bytes_[t2] + bytes_[b1] + bytes_[b2] > 2 * capacity_)
    drop_oldest(b2);
  while (!lists_[b1].empty() && bytes_[t1] + bytes_[t2] + bytes_[b1] + bytes_[b2] > 2 * capacity_)
    drop_oldest(b1);
}

double arc_policy::adapted_target(const std::string& incoming, std::uint64_t bytes) const {
  auto w = where(incoming);
  double size = static_cast<double>(bytes);
  if (w == b1) {
    double ratio =
        bytes_[b1] ? static_cast<double>(bytes_[b2]) / static_cast<double>(bytes_[b1]) : 1;
    return std::min(static_cast<double>(capacity_), p_ + std::max(1.0, ratio) * size);
  }
  if (w == b2) {
    double ratio =
        bytes_[b2] ? static_cast<double>(bytes_[b1]) / static_cast<double>(bytes_[b2]) : 1;
    return std::max(0.0, p_ - std::max(1.0, ratio) * size);
  }
  return p_;
}

void arc_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) {
  auto w = where(model);
  if (w == t1 || w == t2) erase(model);  // re-inserted while resident: start over
  if (w == b1 || w == b2) {
    p_ = adapted_target(model, bytes);
    erase(model);
    push(t2, model, bytes);  // seen before: frequent
  } else {
    push(t1, model, bytes);
  }
  trim_ghosts();
}

void arc_policy::on_access(const std::string& model, timestamp, std::uint64_t) {
  auto it = index_.find(model);
  if (it == index_.end() || it->second.in == b1 || it->second.in == b2) return;
  auto bytes = it->second.at->bytes;
  erase(model);
  push(t2, model, bytes);
}

void arc_policy::on_remove(const std::string& model, bool evicted) {
  auto w = where(model);
  if (w != t1 && w != t2) return;
  auto bytes = index_.at(model).at->bytes;
  erase(model);
  if (evicted) {
    push(w == t1 ? b1 : b2, model, bytes);
    trim_ghosts();
  }
}

std::vector<std::string> arc_policy::choose_victims(const std::string& incoming,
                                                    std::uint64_t bytes, const pinned_fn& pinned,
                                                    timestamp) {
  auto incoming_bytes = bytes;  // only a ghost adapts p, and a ghost knows its size
  if (auto it = index_.find(incoming); it != index_.end()) incoming_bytes = it->second.at->bytes;
  double p = adapted_target(incoming, incoming_bytes);
  bool incoming_in_b2 = where(incoming) == b2;

  std::vector<std::string> victims;
  std::unordered_set<std::string> chosen;
  double t1_bytes = static_cast<double>(bytes_[t1]);
  std::uint64_t freed = 0;
  auto oldest_evictable = [&](list_id l) -> const entry* {
    for (auto it = lists_[l].rbegin(); it != lists_[l].rend(); ++it)
      if (!chosen.count(it->model) && !pinned(it->model)) return &*it;
    return nullptr;
  };
  while (freed < bytes) {
    bool from_t1 = t1_bytes > 0 && (t1_bytes > p || (incoming_in_b2 && t1_bytes == p));
    const entry* e = oldest_evictable(from_t1 ? t1 : t2);
    if (!e) {
      from_t1 = !from_t1;
      e = oldest_evictable(from_t1 ? t1 : t2);
    }
    if (!e) return {};
    victims.push_back(e->model);
    chosen.insert(e->model);
    freed += e->bytes;
    if (from_t1) t1_bytes -= static_cast<double>(e->bytes);
  }
  return victims;
}

std::vector<cache_policy::ranked> arc_policy::eviction_order(timestamp) const {
  // Replacement repeated with the current p: T1's least recent while T1 holds more than p.
  std::vector<ranked> out;
  auto a = lists_[t1].rbegin(), b = lists_[t2].rbegin();
  double t1_bytes = static_cast<double>(bytes_[t1]);
  while (a != lists_[t1].rend() || b != lists_[t2].rend()) {
    bool from_t1 = a != lists_[t1].rend() && (t1_bytes > p_ || b == lists_[t2].rend());
    if (from_t1) {
      out.push_back({a->model, 0});
      t1_bytes -= static_cast<double>(a->bytes);
      ++a;
    } else {
      out.push_back({b->model, 1});
      ++b;
    }
  }
  return out;
}

}  // namespace warm
