#include "policy/srrip_policy.hpp"

#include <algorithm>
#include <utility>

namespace warm {

void srrip_policy::leave_near(entry& e) {
  auto* last = near_.back();
  near_[e.slot] = last;
  last->slot = e.slot;
  near_.pop_back();
}

void srrip_policy::make_near(entry& e) {
  if (e.rrpv == distant) distant_.erase(e.seq);
  e.slot = near_.size();
  near_.push_back(&e);
}

void srrip_policy::make_distant(entry& e) {
  leave_near(e);
  e.rrpv = distant;
  distant_.emplace(e.seq, &e);
}

void srrip_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) {
  on_remove(model, false);
  auto [it, fresh] = index_.try_emplace(model);
  (void)fresh;
  auto& e = it->second;
  e.model = &it->first;
  e.bytes = bytes;
  e.seq = next_seq_++;
  e.rrpv = long_interval;
  make_near(e);
  bytes_ += bytes;
}

void srrip_policy::on_access(const std::string& model, timestamp, std::uint64_t) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  auto& e = it->second;
  if (e.rrpv == distant) make_near(e);
  e.rrpv = 0;
}

void srrip_policy::on_remove(const std::string& model, bool) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  auto& e = it->second;
  if (e.rrpv == distant)
    distant_.erase(e.seq);
  else
    leave_near(e);
  bytes_ -= e.bytes;
  index_.erase(it);
}

std::vector<cache_policy::ranked> srrip_policy::eviction_order(timestamp) const {
  // Highest RRPV first (what aging would reach first), insertion order within one value.
  std::vector<const entry*> all;
  all.reserve(index_.size());
  for (auto& [model, e] : index_)
    all.push_back(&e);
  std::sort(all.begin(), all.end(), [](const entry* a, const entry* b) {
    return a->rrpv != b->rrpv ? a->rrpv > b->rrpv : a->seq < b->seq;
  });
  std::vector<ranked> out;
  out.reserve(all.size());
  for (auto* e : all)
    out.push_back({*e->model, static_cast<double>(e->rrpv)});
  return out;
}

int srrip_policy::rrpv(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? -1 : it->second.rrpv;
}

std::vector<std::string> srrip_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                      const pinned_fn& pinned, timestamp) {
  // Nothing to do, or not enough even with nothing pinned: answer nothing, age nothing.
  if (bytes == 0 || bytes_ < bytes) return {};
  std::vector<entry*> victims;
  std::uint64_t freed = 0;
  auto take = [&](entry& e) {
    victims.push_back(&e);
    freed += e.bytes;
  };
  // The distant models, earliest inserted first (the original scan over every model in
  // insertion order meets them in this order; the others it passes over).
  for (auto it = distant_.begin(); it != distant_.end() && freed < bytes; ++it)
    if (!pinned(*it->second->model)) take(*it->second);
  // Rounds of aging: every distant unpinned model is a victim now, so the next distant ones
  // are those that reach 3 in this round, again earliest inserted first.
  std::vector<std::pair<entry*, int>> aged;  // what to undo should the choice fail
  std::vector<entry*> reached;
  while (freed < bytes) {
    reached.clear();
    bool any = false;
    for (std::size_t i = near_.size(); i-- > 0;) {  // backwards: make_distant moves the last here
      auto& e = *near_[i];
      if (pinned(*e.model)) continue;
      any = true;
      aged.emplace_back(&e, e.rrpv);
      if (e.rrpv + 1 < distant) {
        ++e.rrpv;
      } else {
        make_distant(e);
        reached.push_back(&e);
      }
    }
    if (!any) break;  // every unpinned model is a victim and they are not enough
    std::sort(reached.begin(), reached.end(),
              [](const entry* a, const entry* b) { return a->seq < b->seq; });
    for (auto* e : reached) {
      if (freed >= bytes) break;
      take(*e);
    }
  }
  if (freed < bytes) {  // the unpinned models cannot free enough: leave every RRPV as it was
    for (auto it = aged.rbegin(); it != aged.rend(); ++it) {
      auto& [e, was] = *it;
      if (e->rrpv == distant) make_near(*e);
      e->rrpv = was;
    }
    return {};
  }
  std::vector<std::string> out;
  out.reserve(victims.size());
  for (auto* e : victims)
    out.push_back(*e->model);
  return out;
}

}  // namespace warm
