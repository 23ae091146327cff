// LHD, least hit density (Beckmann, Chen & Cidon, NSDI '18): evicts the model expected to earn
// the fewest hits per unit of the space and time it would still hold. Models are grouped into
// classes by the hits they had since they were loaded (0, 1, 2, 3 or more); per class, two
// histograms by age count the hits (a model used at that age) and the evictions (a model evicted
// at that age). From them the hit density of a class at age a is
//
//     density(c, a) = Σ_{x≥a} hits(c, x) / Σ_{y≥a} width(y) · Σ_{x≥y} events(c, x)
//
// with events = hits + evictions, over age buckets x, y: the hits still to come to a model that
// reached age a, divided by the time it will still spend in the cache (each event at bucket x ≥ a
// ends a lifetime that runs on through the buckets a..x, each counted by its width). The table is
// rebuilt from the histograms every rebuild_every references, then the histograms decay by `decay`
// (LHD's EWMA), so the densities follow a changing workload.
//
// Adapted to whole-model caching:
//  - time is a count of references (each on_insert is one, each on_access adds its count), not
//    seconds: ages measure the traffic between two uses. A resident's age is the references since
//    its last reference, bucketed logarithmically (4 buckets per doubling, 128 reach past 2^32), so
//    there is no coarsening parameter to tune;
//  - a use (on_access) records one hit at the model's age, whatever its count, and raises its
//    class by the count; an eviction (on_remove with evicted) records the model's age in its
//    class; an unregistration records nothing;
//  - a hit saves a load, and warm minimises load time, so a model's rank is its density ×
//    load_seconds / bytes; the lowest rank goes first, ties to the older last reference, then
//    the id. A model must be resident to serve, so there is no admission refusal;
//  - candidates are every unpinned resident when there are at most `sample` residents besides
//    the victims chosen so far, else `sample` residents drawn uniformly (with replacement) by a
//    fixed-seed generator, as LHD samples, of which the pinned ones and the victims are passed
//    over (every unpinned resident is looked at when all of them are); one draw per victim, until
//    the victims' bytes fit, never a victim twice. The draw is over all residents, not only the
//    unpinned ones, so that a choice never looks at every resident: with no resident pinned it is
//    a draw over the unpinned ones;
//  - until a table has been built from some hit or eviction (each choose_victims builds one while
//    none has), every density is 0 and the order is the oldest last reference first (LRU).
// choose_victims answers nothing, changing nothing, when the unpinned models cannot free enough.
// Cost: O(sample) per victim, and the table's rebuild (classes × age_buckets) every rebuild_every
// references; whether the unpinned models can free enough is known only when every one of them
// has been looked at (a choice that fails puts the generator back as it was).
#pragma once

#include <array>
#include <random>
#include <unordered_map>

#include "policy/cache_policy.hpp"

namespace warm {

class lhd_policy final : public cache_policy {
 public:
  static constexpr unsigned classes = 4;                // hits since the load: 0, 1, 2, 3+
  static constexpr std::size_t age_buckets = 128;       // 4 per doubling: ages below 2^33
  static constexpr std::uint64_t rebuild_every = 1024;  // references between table rebuilds
  static constexpr double decay = 0.9;                  // histograms ×0.9 after each rebuild
  static constexpr std::size_t sample = 64;             // candidates per victim
  static constexpr std::uint32_t seed = 5489;           // the sampler's (std::mt19937's default)

  std::string_view name() const override { return "lhd"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return models_.size(); }
  // Every resident by rank (density × load_seconds / bytes, the score), lowest first, from the
  // table choose_victims would use. With more than `sample` unpinned residents, choose_victims
  // evicts the lowest of a sample, not necessarily the head of this list.
  std::vector<ranked> eviction_order(timestamp now) const override;

  // The age bucket of `age` references, and the live table's density (0 before any table).
  static std::size_t bucket_of(std::uint64_t age);
  double density(unsigned cls, std::uint64_t age) const { return table_[cls][bucket_of(age)]; }

 private:
  using histogram = std::array<std::array<double, age_buckets>, classes>;
  struct entry {
    std::uint64_t bytes;
    double load_seconds;
    std::uint64_t last;  // the reference count at its last reference
    unsigned cls = 0;
    std::size_t slot;                    // its place in residents_
    const std::string* model = nullptr;  // its key in models_
    std::uint64_t chosen = 0;            // the choice that made it a victim (0: none)
  };

  static double width_of(std::size_t bucket);
  histogram compute() const;
  void rebuild();
  void tick(std::uint64_t references);
  double rank(const histogram& table, const entry& e) const;
  // Whether a goes before b: lower rank, then older last reference, then id.
  bool before(const histogram& table, const entry& a, const entry& b) const;

  std::unordered_map<std::string, entry> models_;
  std::vector<entry*> residents_;  // what the sampler draws from
  std::uint64_t bytes_ = 0;        // every resident's
  std::uint64_t choices_ = 0;      // choose_victims calls: the last `chosen` mark handed out
  histogram hits_{}, evictions_{}, table_{};
  bool learned_ = false;  // table_ was built from some event
  std::uint64_t time_ = 0, built_at_ = 0;
  std::mt19937 rng_{seed};
};

}  // namespace warm
