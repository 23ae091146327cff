// LeCaR (Vietri et al., "Driving cache replacement with ML-based LeCaR", HotStorage '18): two
// experts, LRU and LFU, and a weight for each, learned by regret minimisation. Each eviction
// follows one expert, drawn at random with the probability of its weight. Each expert keeps a
// history of the models evicted on its advice; when one of them is requested again, that advice
// was a mistake: the expert's weight is multiplied by e^(−λ·r) and the weights are normalised
// to sum to 1. The regret r = d^t is larger the sooner the mistake shows (t: time since the
// eviction), with the discount d = 0.005^(1/N) for a cache of N entries.
//
// Adapted to whole-model caching:
//  - the experts are lru_policy and lfu_policy, told of every insert, access and removal of the
//    real residents; an eviction answers the drawn expert's choose_victims for the bytes asked
//    (several victims from one expert, as the original evicts one page on its advice);
//  - time is a count of references (each on_insert is one, each on_access adds its count) and N
//    the number of resident models (at least 1), so d adapts to how many models fit;
//  - a victim that the other expert would also have chosen for the same bytes (it is in the
//    other's victims) goes to neither history, as in the original (no expert was wrong alone);
//  - each history holds ids with their size, trimmed (oldest first) to the capacity's bytes:
//    policy_options::capacity, then set_capacity; while it is 0 (unknown), the largest total of
//    resident bytes seen. A model loaded again leaves both histories;
//  - the draw uses std::mt19937 with a fixed seed (u = output / 2^32, LRU when u < w_lru), so
//    runs are deterministic; a choose_victims that answers nothing draws nothing;
//  - a model must be resident to serve, so there is no admission refusal.
#pragma once

#include <list>
#include <random>
#include <unordered_map>

#include "policy/lfu_policy.hpp"
#include "policy/lru_policy.hpp"

namespace warm {

class lecar_policy final : public cache_policy {
 public:
  static constexpr double learning_rate = 0.45;   // λ
  static constexpr double discount_base = 0.005;  // d = discount_base^(1/N)
  static constexpr std::uint32_t seed = 5489;     // the draw's (std::mt19937's default)

  explicit lecar_policy(std::uint64_t capacity) : capacity_(capacity) {}

  std::string_view name() const override { return "lecar"; }
  void set_capacity(std::uint64_t bytes) override;
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return lru_.size(); }
  // The order of the expert with the larger weight (LRU on a tie), with its scores.
  std::vector<ranked> eviction_order(timestamp now) const override;

  enum expert_id { lru, lfu };
  double weight_lru() const { return weight_[lru]; }
  double weight_lfu() const { return weight_[lfu]; }
  bool in_history(expert_id e, const std::string& model) const {
    return history_[e].index.count(model) != 0;
  }

 private:
  struct ghost {
    std::string model;
    std::uint64_t bytes;
    std::uint64_t evicted_at;  // the reference count when it was evicted
  };
  struct history {
    std::list<ghost> ghosts;  // newest first
    std::unordered_map<std::string, std::list<ghost>::iterator> index;
    std::uint64_t bytes = 0;
  };

  cache_policy& expert(int e) { return e == lru ? static_cast<cache_policy&>(lru_) : lfu_; }
  void forget(history& h, const std::string& model);
  void trim(history& h);

  lru_policy lru_;
  lfu_policy lfu_;
  double weight_[2] = {0.5, 0.5};
  history history_[2];
  std::unordered_map<std::string, int> chooser_;  // victims of the last choice: expert, or -1
  std::unordered_map<std::string, std::uint64_t> resident_bytes_;
  std::uint64_t capacity_, peak_ = 0, used_ = 0, time_ = 0;
  std::mt19937 rng_{seed};
};

}  // namespace warm
