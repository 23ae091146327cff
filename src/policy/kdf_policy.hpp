// kdf — "knapsack over decayed frequency", warm's own policy.
//
// Value. Keeping model i resident saves its load time P_i each time it is requested again. kdf
// predicts that from an exponentially decayed count of its requests, c_i(t) = Σ_k e^{−(t−t_k)/τ}
// (kept across evictions: a model that was popular before it was evicted is still known to be),
// and values the model at v_i = P_i · f(c_i), with f(c) = c, or with a saturating
// f(c) = 1 − e^{−h·c} (evicting a hot model costs about one reload, not one per request).
//
// Victims. To free B bytes kdf evicts the set of unpinned residents with the least total value
// whose bytes reach B — a knapsack, solved exactly over up to 12 candidates (else greedily by
// value per byte, improved by any single model that frees B alone for less). Greedy-by-density
// policies (GDSF, IAM) evict more value than needed when sizes differ a lot.
//
// Defaults τ = 1200 s, h = 0.2, chosen on the mCache-style Azure traces (docs/policies.md has the
// grid and what it does to each scheme). "kdf-adaptive" (policy/expert_policy.hpp) runs several
// (τ, h) as experts and follows the best; on those traces it did not beat the fixed defaults.
#pragma once

#include <unordered_map>
#include <vector>

#include "policy/cache_policy.hpp"

namespace warm {

class kdf_policy final : public cache_policy {
 public:
  explicit kdf_policy(const policy_options& options);

  std::string_view name() const override { return "kdf"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds, timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes, const pinned_fn& pinned,
                                          timestamp now) override;
  std::size_t size() const override { return residents_.size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

 private:
  struct decayed {
    double value = 0;
    timestamp at{};
  };
  struct model_info {
    std::uint64_t bytes = 0;
    double penalty = 0;
  };
  struct candidate {
    const std::string* model;
    std::uint64_t bytes;
    double value;
  };

  double decayed_count(const decayed& d, timestamp now) const;
  double value(const std::string& model, timestamp now) const;
  // Candidates up to which the knapsack is solved exactly (2^n subsets).
  static constexpr std::size_t exact_limit = 12;
  // The least-value subset of `cands` whose bytes reach `bytes`, in ascending value.
  static std::vector<std::string> knapsack(std::vector<candidate> cands, std::uint64_t bytes);

  double tau_;      // seconds; 0 = no decay
  double horizon_;  // 0 = linear value
  std::unordered_map<std::string, decayed> counts_;  // every model seen, kept across evictions
  // Resident models, pointing at their count (unordered_map keeps element addresses stable).
  struct resident {
    model_info info;
    const decayed* count = nullptr;
  };
  std::unordered_map<std::string, resident> residents_;
  double value_of(const resident& r, timestamp now) const;
};

}  // namespace warm
