#include "policy/sieve_policy.hpp"

namespace warm {

sieve_policy::iterator sieve_policy::step(iterator it) {
  if (it == queue_.begin()) return std::prev(queue_.end());
  return std::prev(it);
}

std::list<sieve_policy::entry>::const_iterator sieve_policy::step(
    std::list<entry>::const_iterator it) const {
  if (it == queue_.begin()) return std::prev(queue_.end());
  return std::prev(it);
}

void sieve_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) {
  on_remove(model, false);
  queue_.push_front({model, bytes, false});
  index_[model] = queue_.begin();
  bytes_ += bytes;
}

void sieve_policy::on_access(const std::string& model, timestamp, std::uint64_t) {
  auto it = index_.find(model);
  if (it != index_.end()) it->second->visited = true;
}

void sieve_policy::on_remove(const std::string& model, bool) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  if (hand_ == it->second) hand_ = queue_.size() > 1 ? step(hand_) : queue_.end();
  bytes_ -= it->second->bytes;
  queue_.erase(it->second);
  index_.erase(it);
  if (queue_.empty()) hand_ = queue_.end();
}

std::vector<std::string> sieve_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                      const pinned_fn& pinned, timestamp) {
  if (bytes == 0 || queue_.empty() || bytes_ < bytes) return {};
  std::vector<std::string> victims;
  std::vector<entry*> cleared;  // bits cleared by this look, restored if it finds too little
  std::uint64_t freed = 0;
  auto it = hand_ == queue_.end() ? std::prev(queue_.end()) : hand_;
  // Two rounds at most: the first clears every visited bit it passes, the second finds them clear.
  for (std::size_t looked = 0; freed < bytes && looked < 2 * queue_.size() + 1;
       ++looked, it = step(it)) {
    if (pinned(it->model)) continue;
    if (it->visited) {
      it->visited = false;
      cleared.push_back(&*it);
      continue;
    }
    bool chosen = false;
    for (auto& v : victims)
      chosen = chosen || v == it->model;
    if (chosen) continue;
    victims.push_back(it->model);
    freed += it->bytes;
  }
  if (freed < bytes) {  // the unpinned models cannot free enough: change nothing
    for (auto* e : cleared)
      e->visited = true;
    return {};
  }
  // The hand rests on the last victim: on_remove moves it on as the victims leave.
  hand_ = index_.at(victims.back());
  return victims;
}

std::vector<cache_policy::ranked> sieve_policy::eviction_order(timestamp) const {
  std::vector<ranked> unvisited, visited;
  if (queue_.empty()) return {};
  auto start =
      hand_ == queue_.end() ? std::prev(queue_.cend()) : std::list<entry>::const_iterator(hand_);
  auto it = start;
  do {
    (it->visited ? visited : unvisited).push_back({it->model, it->visited ? 1.0 : 0.0});
    it = step(it);
  } while (it != start);
  unvisited.insert(unvisited.end(), visited.begin(), visited.end());
  return unvisited;
}

}  // namespace warm
