#include "policy/lhd_policy.hpp"

#include <algorithm>
#include <unordered_set>

namespace warm {

std::size_t lhd_policy::bucket_of(std::uint64_t age) {
  if (age < 4) return static_cast<std::size_t>(age);
  std::size_t k = 0;  // floor(log2 age) >= 2
  while (k < 63 && (age >> (k + 1)) != 0)
    ++k;
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
  models_[model] = {bytes, load_seconds, time_ + 1, 0, residents_.size()};
  residents_.push_back(model);
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
    residents_[slot] = std::move(residents_.back());
    models_.at(residents_[slot]).slot = slot;
  }
  residents_.pop_back();
  models_.erase(it);
}

double lhd_policy::rank(const histogram& table, const entry& e) const {
  double density = table[e.cls][bucket_of(time_ - e.last)];
  return density * e.load_seconds / static_cast<double>(std::max<std::uint64_t>(e.bytes, 1));
}

bool lhd_policy::before(const histogram& table, const std::string& a, const std::string& b) const {
  auto &ea = models_.at(a), &eb = models_.at(b);
  double ra = rank(table, ea), rb = rank(table, eb);
  if (ra != rb) return ra < rb;
  if (ea.last != eb.last) return ea.last < eb.last;
  return a < b;
}

std::vector<std::string> lhd_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                    const pinned_fn& pinned, timestamp) {
  std::vector<const std::string*> eligible;
  std::uint64_t available = 0;
  for (auto& m : residents_)
    if (!pinned(m)) {
      eligible.push_back(&m);
      available += models_.at(m).bytes;
    }
  if (bytes == 0 || available < bytes) return {};
  if (!learned_) rebuild();

  std::vector<std::string> victims;
  std::unordered_set<const std::string*> chosen;
  std::uniform_int_distribution<std::size_t> draw(0, eligible.size() - 1);
  std::uint64_t freed = 0;
  while (freed < bytes) {
    const std::string* best = nullptr;
    auto consider = [&](const std::string* m) {
      if (!chosen.count(m) && (!best || before(table_, *m, *best))) best = m;
    };
    if (eligible.size() - chosen.size() > sample)
      for (std::size_t i = 0; i < sample; ++i)
        consider(eligible[draw(rng_)]);
    if (!best)  // few enough to look at all (or a sample of victims only)
      for (auto* m : eligible)
        consider(m);
    chosen.insert(best);
    victims.push_back(*best);
    freed += models_.at(*best).bytes;
  }
  return victims;
}

std::vector<cache_policy::ranked> lhd_policy::eviction_order(timestamp) const {
  auto table = learned_ ? table_ : compute();  // what choose_victims would build first
  std::vector<std::string> order(residents_);
  std::sort(order.begin(), order.end(),
            [&](const std::string& a, const std::string& b) { return before(table, a, b); });
  std::vector<ranked> out;
  for (auto& m : order)
    out.push_back({m, rank(table, models_.at(m))});
  return out;
}

}  // namespace warm
