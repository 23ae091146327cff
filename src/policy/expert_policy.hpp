// kdf-adaptive: kdf's parameters chosen online by a mixture of experts.
//
// Which (τ, h) suits kdf best depends on the workload (how bursty, how skewed, whether the
// popular models are the large or the small ones), so kdf-adaptive runs several experts — kdf
// with τ ∈ {300 s, 1200 s, none} and linear or saturating value (kdf_policy.hpp) — and makes each
// real eviction the way the expert with the lowest recent cost would. (Adding GDSF and LFU as
// experts was tried and made it worse on the Azure traces: docs/policies.md.)
//
// Each expert is two instances of its policy: one told about the real cache's inserts, accesses
// and removals (it ranks the real residents when it leads), and one running a shadow cache of
// the same capacity that sees every request. A shadow miss charges the expert the model's load
// time; costs decay with time constant `kdf_window` (default 10 min), so the leader follows
// changes in the workload. Every expert sees every request, so a leader change needs no warm-up.
// Cost: each request updates every expert's two instances (6 experts); shadow evictions are the
// experts' own choices over the shadow residents.
#pragma once

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "policy/cache_policy.hpp"

namespace warm {

class expert_policy final : public cache_policy {
 public:
  struct expert_spec {
    std::string label;   // e.g. "kdf(1200s,0.2)", for inspection and docs
    std::string policy;  // a make_policy name
    policy_options options;
  };

  // The experts kdf runs by default, sized for `options.capacity`.
  static std::vector<expert_spec> default_experts(const policy_options& options);

  expert_policy(const policy_options& options, std::vector<expert_spec> experts);

  std::string_view name() const override { return "kdf-adaptive"; }
  void set_capacity(std::uint64_t bytes) override { capacity_ = bytes; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return resident_; }
  std::vector<ranked> eviction_order(timestamp now) const override {
    return best(now).real->eviction_order(now);
  }

  // The label of the expert real evictions follow at `now`.
  const std::string& leader(timestamp now) const;

 private:
  struct model_info {
    std::uint64_t bytes = 0;
    double load_seconds = 0;
  };
  struct expert {
    expert_spec spec;
    std::unique_ptr<cache_policy> real, shadow;
    std::unordered_set<std::string> shadow_residents;
    std::uint64_t shadow_bytes = 0;
    double cost = 0;  // decayed load seconds of its shadow misses, as of cost_at
    timestamp cost_at{};
  };
  double cost_at(const expert& e, timestamp now) const;
  const expert& best(timestamp now) const;
  void shadow_request(expert& e, const std::string& model, timestamp now, std::uint64_t count);

  std::uint64_t capacity_;
  double window_;
  std::vector<expert> experts_;
  std::unordered_map<std::string, model_info> known_;
  std::size_t resident_ = 0;
};

}  // namespace warm
