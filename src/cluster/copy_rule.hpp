// How many copies of a model a cluster keeps (docs/cluster.md). Pure logic: every instance that
// holds a copy measures that copy's queueing (requests in flight for the model there, sampled by
// a queue_meter) and decides with decide_copies; the copy scaler (copy_scaler.hpp) acts on the
// answer.
//
// The rule, for one model, at one of its holders:
//  - More copies when this copy's queueing, averaged over the last `sustain`, is at least
//    `add_queue` requests, and a live instance that does not hold the model can take one. How
//    many: enough that the same load would queue about add_queue / 2 per copy
//    (copies × queueing / (add_queue / 2), rounded up), at least one more, at most twice as many
//    as now, at most one per instance that can take one.
//  - One copy fewer (this one) when the cluster is full (its live instances' used bytes are at
//    least `full_fraction` of their capacity), the model has two copies or more, and this copy's
//    queueing averaged over the last `cool` would stay below `drop_queue` with one copy fewer.
//  - Neither within `settle` of the model's last change of copies anywhere in the cluster (a key
//    in etcd written by compare-and-set, so that holders deciding at once make one change).
// A steady load never makes a copy go that it would then add again: a drop needs the queueing to
// stay below drop_queue with one copy fewer, and drop_queue < add_queue / 2 (check_copy_rule).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/records.hpp"
#include "warm/error.hpp"

namespace warm::cluster {

struct copy_rule {
  double add_queue = 2.0;  // requests in flight per copy that call for more copies; 0: never
  std::int64_t sustain_ms = 1000;
  double drop_queue = 0.5;  // per copy, with one copy fewer, below which a copy may go
  std::int64_t cool_ms = 60000;
  std::int64_t settle_ms = 10000;
  double full_fraction = 0.9;
};

// invalid_argument naming the field: negative thresholds, drop_queue not below add_queue / 2,
// windows not positive, full_fraction outside (0, 1].
expected<void> check_copy_rule(const copy_rule& r);

// What one holder knows about one of its models.
struct copy_view {
  std::uint32_t copies = 1;  // live instances holding it, not draining, this one among them
  std::uint32_t room = 0;    // live instances that could take a copy: not holding or loading it,
                             // not draining, no recent failed load of it
  std::optional<double> recent;     // this copy's mean queueing over the last sustain_ms
  std::optional<double> slow;       // ... over the last cool_ms
  std::int64_t last_change_ms = 0;  // the model's last change of copies (unix ms; 0: none)
  bool cluster_full = false;
  std::int64_t now_ms = 0;
};

// Copies to add (> 0), this copy to drop (-1), or nothing (0).
int decide_copies(const copy_rule& rule, const copy_view& v);

// Whether the live, non-draining members' used bytes are at least `fraction` of their capacity.
bool cluster_is_full(const std::vector<member>& members, double fraction);

// The queueing of the copies held here, from samples taken at a steady interval: each resident
// model's requests in flight at each sample. Keeps `horizon_ms` of history; memory grows with the
// models that had a request in flight within it (idle ones cost one entry).
class queue_meter {
 public:
  explicit queue_meter(std::int64_t horizon_ms) : horizon_ms_(horizon_ms) {}

  // One sample at `now_ms` (not before the last): the models resident now, each with its
  // requests in flight. A model missing from a sample is no longer resident; its history goes.
  void sample(std::int64_t now_ms,
              const std::vector<std::pair<std::string, std::uint32_t>>& resident);

  // The mean of `model`'s samples taken within the last `window_ms` (≤ the horizon); nullopt
  // unless it was resident at every sample of the window and was first sampled at least
  // window_ms ago (a copy loaded a moment ago has no queueing to judge yet).
  std::optional<double> mean(const std::string& model, std::int64_t window_ms) const;

  // The models resident at the last sample, by name.
  std::vector<std::string> models() const;

 private:
  struct history {
    std::int64_t since_ms = 0;                                // first sampled resident
    std::deque<std::pair<std::int64_t, std::uint32_t>> busy;  // samples with requests in flight
  };
  std::int64_t horizon_ms_;
  std::int64_t last_ms_ = 0;
  std::deque<std::int64_t> samples_;  // when each sample within the horizon was taken
  std::map<std::string, history> models_;
};

}  // namespace warm::cluster
