#include "policy/srrip_policy.hpp"

#include <unordered_set>

namespace warm {

void srrip_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) {
  on_remove(model, false);
  order_.push_back({model, bytes, long_interval});
  index_[model] = std::prev(order_.end());
}

void srrip_policy::on_access(const std::string& model, timestamp, std::uint64_t) {
  auto it = index_.find(model);
  if (it != index_.end()) it->second->rrpv = 0;
}

void srrip_policy::on_remove(const std::string& model, bool) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  order_.erase(it->second);
  index_.erase(it);
}

std::vector<cache_policy::ranked> srrip_policy::eviction_order(timestamp) const {
  // Highest RRPV first (what aging would reach first), insertion order within one value.
  std::vector<ranked> out;
  for (int v = distant; v >= 0; --v)
    for (auto& e : order_)
      if (e.rrpv == v) out.push_back({e.model, static_cast<double>(e.rrpv)});
  return out;
}

int srrip_policy::rrpv(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? -1 : it->second->rrpv;
}

std::vector<std::string> srrip_policy::choose_victims(const std::string&, std::uint64_t bytes, const pinned_fn& pinned,
                                                     timestamp) {
  std::uint64_t available = 0;
  for (auto& e : order_)
    if (!pinned(e.model)) available += e.bytes;
  if (available < bytes) return {};  // do not age anything for a choice that cannot succeed

  std::vector<std::string> victims;
  std::unordered_set<std::string> chosen;
  std::uint64_t freed = 0;
  while (freed < bytes) {
    bool found = false;
    for (auto& e : order_) {
      if (e.rrpv != distant || chosen.count(e.model) || pinned(e.model)) continue;
      victims.push_back(e.model);
      chosen.insert(e.model);
      freed += e.bytes;
      found = true;
      if (freed >= bytes) break;
    }
    if (!found)
      for (auto& e : order_)
        if (!chosen.count(e.model) && !pinned(e.model) && e.rrpv < distant) ++e.rrpv;
  }
  return victims;
}

}  // namespace warm
