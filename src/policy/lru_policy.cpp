#include "policy/lru_policy.hpp"

namespace warm {

void lru_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp now) {
  on_remove(model, false);
  order_.push_front({model, bytes, now});
  index_[model] = order_.begin();
}

void lru_policy::on_access(const std::string& model, timestamp now, std::uint64_t) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  if (now < it->second->used) return;  // an older access reported late changes nothing
  it->second->used = now;
  // Accesses may be reported after later events (the hit path counts in the serving slot and the
  // device actor reports at its next look), so place by time, not by arrival: usually the front.
  auto at = order_.begin();
  while (at != order_.end() && (at == it->second || at->used > now))
    ++at;
  order_.splice(at, order_, it->second);
}

std::vector<cache_policy::ranked> lru_policy::eviction_order(timestamp now) const {
  std::vector<ranked> out;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it)
    out.push_back({it->model, std::chrono::duration<double>(now - it->used).count()});
  return out;
}

void lru_policy::on_remove(const std::string& model, bool) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  order_.erase(it->second);
  index_.erase(it);
}

std::vector<std::string> lru_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                    const pinned_fn& pinned, timestamp) {
  std::vector<std::string> victims;
  std::uint64_t freed = 0;
  for (auto it = order_.rbegin(); it != order_.rend() && freed < bytes; ++it) {
    if (pinned(it->model)) continue;
    victims.push_back(it->model);
    freed += it->bytes;
  }
  if (freed < bytes) victims.clear();
  return victims;
}

}  // namespace warm
