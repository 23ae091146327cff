#include "policy/lhd_policy.hpp"

#include <algorithm>
#include <optional>

namespace warm {

std::size_t lhd_policy::bucket_of(std::uint64_t age) {
  if (age < 4) return static_cast<std::size_t>(age);
  auto k = static_cast<std::size_t>(63 - __builtin_clzll(age));  // floor(log2 age) >= 2
  // 4 buckets per doubling: [2^k, 2^(k+1)) split by the two bits below the leading one.
  auto b = 4 * (k - 1) + static_cast<std::size_t>((age >> (k - 2)) - 4);
  return std::min(b, age_buckets - 1);
}

double lhd_policy::width_of(std::size_t bucket) {
  if (bucket < 8) return 1;  // ages 0..7, one each
  return static_cast<double>(std::uint64_t{1} << (bucket / 4 - 1));
}

lhd_policy::histogram lhd_policy::compute() const {
  histogram table{};
  for (unsigned c = 0; c < classes; ++c) {
    double hits = 0, events = 0, lifetime = 0;
    for (std::size_t a = age_buckets; a-- > 0;) {
      hits += hits_[c][a];
      events += hits_[c][a] + evictions_[c][a];
      lifetime += events * width_of(a);
      table[c][a] = lifetime > 0 ? hits / lifetime : 0;
    }
  }
  return table;
}

void lhd_policy::rebuild() {
  table_ = compute();
  for (unsigned c = 0; c < classes; ++c)
    for (std::size_t a = 0; a < age_buckets; ++a) {
      learned_ = learned_ || hits_[c][a] > 0 || evictions_[c][a] > 0;
      hits_[c][a] *= decay;
      evictions_[c][a] *= decay;
    }
  built_at_ = time_;
}

void lhd_policy::tick(std::uint64_t references) {
  time_ += references;
  if (time_ - built_at_ >= rebuild_every) rebuild();
}

void lhd_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                           timestamp) {
  on_remove(model, false);  // re-inserted while resident: start over
  auto [it, fresh] = models_.try_emplace(model);
  (void)fresh;
  auto& e = it->second;
  e = {bytes, load_seconds, time_ + 1, 0, residents_.size(), &it->first, 0};
  residents_.push_back(&e);
  bytes_ += bytes;
  tick(1);
}

void lhd_policy::on_access(const std::string& model, timestamp, std::uint64_t count) {
  auto it = models_.find(model);
  if (it == models_.end() || count == 0) return;
  auto& e = it->second;
  hits_[e.cls][bucket_of(time_ + 1 - e.last)] += 1;  // the first of the `count` uses
  e.cls = static_cast<unsigned>(std::min<std::uint64_t>(classes - 1, e.cls + count));
  e.last = time_ + count;
  tick(count);
}

void lhd_policy::on_remove(const std::string& model, bool evicted) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  if (evicted) evictions_[it->second.cls][bucket_of(time_ - it->second.last)] += 1;
  auto slot = it->second.slot;
  if (slot + 1 != residents_.size()) {
    residents_[slot] = residents_.back();
    residents_[slot]->slot = slot;
  }
  residents_.pop_back();
  bytes_ -= it->second.bytes;
  models_.erase(it);
}

double lhd_policy::rank(const histogram& table, const entry& e) const {
  double density = table[e.cls][bucket_of(time_ - e.last)];
  return density * e.load_seconds / static_cast<double>(std::max<std::uint64_t>(e.bytes, 1));
}

bool lhd_policy::before(const histogram& table, const entry& a, const entry& b) const {
  double ra = rank(table, a), rb = rank(table, b);
  if (ra != rb) return ra < rb;
  if (a.last != b.last) return a.last < b.last;
  return *a.model < *b.model;
}

std::vector<std::string> lhd_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                    const pinned_fn& pinned, timestamp) {
  // Nothing to do, or not enough even with nothing pinned: answer nothing, change nothing.
  if (bytes == 0 || bytes_ < bytes) return {};
  if (!learned_) {
    // The first table is built only for a choice that succeeds; until then (before any hit or
    // eviction) whether it can is summed over every resident.
    std::uint64_t available = 0;
    for (auto* e : residents_)
      if (!pinned(*e->model)) available += e->bytes;
    if (available < bytes) return {};
    rebuild();
  }

  auto choice = ++choices_;
  std::vector<entry*> victims;
  std::size_t n = residents_.size();
  std::uniform_int_distribution<std::size_t> draw(0, n - 1);
  std::optional<std::mt19937> saved;  // the generator before this choice drew
  std::uint64_t freed = 0;
  while (freed < bytes) {
    entry* best = nullptr;
    double best_rank = 0;
    // As before(table_, …), with the candidate's rank computed once.
    auto consider = [&](entry* e) {
      double r = rank(table_, *e);
      if (best && !(r != best_rank          ? r < best_rank
                    : e->last != best->last ? e->last < best->last
                                            : *e->model < *best->model))
        return;
      best = e;
      best_rank = r;
    };
    if (n - victims.size() > sample) {
      if (!saved) saved.emplace(rng_);
      for (std::size_t i = 0; i < sample; ++i) {
        auto* e = residents_[draw(rng_)];
        if (e->chosen != choice && !pinned(*e->model)) consider(e);
      }
    }
    if (!best)  // few enough to look at all (or a sample of victims and pinned models only)
      for (auto* e : residents_)
        if (e->chosen != choice && !pinned(*e->model)) consider(e);
    if (!best) {  // every unpinned resident is a victim, and they are not enough
      if (saved) rng_ = *saved;
      return {};
    }
    best->chosen = choice;
    victims.push_back(best);
    freed += best->bytes;
  }
  std::vector<std::string> out;
  out.reserve(victims.size());
  for (auto* e : victims)
    out.push_back(*e->model);
  return out;
}

std::vector<cache_policy::ranked> lhd_policy::eviction_order(timestamp) const {
  auto table = learned_ ? table_ : compute();  // what choose_victims would build first
  std::vector<const entry*> order(residents_.begin(), residents_.end());
  std::sort(order.begin(), order.end(),
            [&](const entry* a, const entry* b) { return before(table, *a, *b); });
  std::vector<ranked> out;
  out.reserve(order.size());
  for (auto* e : order)
    out.push_back({*e->model, rank(table, *e)});
  return out;
}

}  // namespace warm
