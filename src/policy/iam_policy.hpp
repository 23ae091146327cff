// mCache's importance-aware policy (IAM). Each resident model i has
//   utility_i = (P_i / S_i) · rate_i,   rank_i = log(#{resident j ≠ i : u_i > u_j} + b0)
// (policy/importance.hpp); victims come from the bottom of a min-heap of ranks until the new
// model fits. Scores are not updated in place: a fresh heap is built from a snapshot of the
// inputs (score_inputs) — by the importance scorer actor in the daemon, by the policy itself every
// `rescore_period` in the simulator — and swapped in whole (swap_scores). Until the swap the old
// heap serves evictions. A model inserted between rebuilds is scored at insertion against the
// live heap and ranked with the rest. Request rates are kept per model across evictions, as an
// EWMA (time constant rate_tau) or a sliding window (rate_window).
#pragma once

#include <deque>
#include <unordered_map>

#include "core/rate_meter.hpp"
#include "policy/importance.hpp"
#include "policy/ranked_set.hpp"

namespace warm {

class iam_policy final : public cache_policy, public rescoring {
 public:
  explicit iam_policy(const policy_options& options);

  std::string_view name() const override { return "iam"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return residents_.size(); }
  std::vector<ranked> eviction_order(timestamp now) const override;

  std::vector<score_input> score_inputs(timestamp now) override;
  void swap_scores(std::shared_ptr<const importance_heap> heap) override;
  double bias() const override { return options_.iam_bias; }
  rescoring* rescorer() override { return this; }

  const importance_heap& live() const { return *live_; }
  double rate(const std::string& model, timestamp now);

 private:
  // A model's request rate: EWMA of its use counter, or the uses in the last window.
  struct rate_state {
    rate_meter ewma;
    std::uint64_t count = 0;
    std::deque<std::pair<timestamp, std::uint64_t>> window;
  };
  struct resident {
    std::uint64_t bytes = 0;
    double penalty = 0;
  };
  rate_state& rates_of(const std::string& model);

  policy_options options_;
  std::unordered_map<std::string, resident> residents_;
  std::unordered_map<std::string, rate_state> rates_;  // kept across evictions
  std::shared_ptr<const importance_heap> live_;
  ranked_set<double> fresh_;  // inserted since the live heap was built, by rank at insertion
  // live_->entries before this index are gone for good (evicted, or re-inserted into fresh_)
  // until the next swap: choose_victims starts here instead of skipping them on every call.
  std::size_t live_head_ = 0;
};

}  // namespace warm
