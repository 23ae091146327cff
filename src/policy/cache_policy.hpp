// Eviction policies: which resident models a device gives up so that a new one fits. Pure logic
// with time from the caller, shared by the daemon's device actors and the offline simulator: the
// same code, never a second implementation. docs/policies.md describes each policy.
//
// Contract (the caller is the device actor or the simulator):
//  1. on_insert when a model becomes resident (after its load): the load is the model's first
//     reference (the request that missed, with every request that waited on the same load).
//     on_access for every later use; `count` folds several uses at one time.
//  2. on_remove when the model leaves: `evicted` when the policy chose it, false when it left for
//     another reason (unregistration). Unknown models are ignored by every call.
//  3. choose_victims answers, without removing anything, resident models in eviction order whose
//     bytes add up to at least `bytes` (to make room for `incoming`, which is not resident),
//     never one for which `pinned` is true; empty when the unpinned models cannot free enough. It
//     may update aging state (SRRIP). The caller then on_remove(…, true)s the victims it evicts, in
//     order.
//  4. Not thread-safe: one owner (an actor) calls it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/importance.hpp"
#include "warm/clock.hpp"
#include "warm/error.hpp"
#include "warm/policy_options.hpp"

namespace warm {

using pinned_fn = std::function<bool(const std::string&)>;

// The periodic re-scoring interface of policies that have one (IAM): the importance scorer (or
// the simulator) takes a snapshot of the inputs, builds a fresh heap away from the device, and
// swaps it in.
class rescoring {
 public:
  virtual ~rescoring() = default;
  // What scores need, for every resident model, as of `now`.
  virtual std::vector<score_input> score_inputs(timestamp now) = 0;
  // Replaces the live heap (built from score_inputs by build_importance_heap).
  virtual void swap_scores(std::shared_ptr<const importance_heap> heap) = 0;
  virtual double bias() const = 0;
};

class cache_policy {
 public:
  virtual ~cache_policy() = default;

  virtual std::string_view name() const = 0;

  // A model became resident: `bytes` on the device, `load_seconds` the cost of loading it again.
  virtual void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                         timestamp now) = 0;
  // The resident model served `count` requests, the last at `now`.
  virtual void on_access(const std::string& model, timestamp now, std::uint64_t count = 1) = 0;
  // The model left the device (`evicted`: chosen by this policy).
  virtual void on_remove(const std::string& model, bool evicted) = 0;

  virtual std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                                  const pinned_fn& pinned, timestamp now) = 0;

  // Resident models the policy tracks, for tests and inspection.
  virtual std::size_t size() const = 0;

  // Every resident model, first to be evicted first (ignoring pins), with the policy's score for
  // it — what the order is by: lru seconds since last use, lfu uses, arc list (0 = T1, 1 = T2),
  // srrip RRPV, gdsf priority H, iam rank, kdf value (load seconds saved). For inspection; does
  // not change the policy's state.
  struct ranked {
    std::string model;
    double score = 0;
  };
  virtual std::vector<ranked> eviction_order(timestamp now) const = 0;

  // What the policy remembers of a model's requests, so that the memory can follow the model to
  // another device: in a cluster an evicted model is loaded wherever placement puts it next.
  // kdf answers its decayed count and the time it is referred to; the other policies keep
  // nothing that travels and answer {0, {}}.
  struct history {
    double count = 0;
    timestamp at{};
  };
  virtual history remembered(const std::string& model) const {
    (void)model;
    return {};
  }
  // Merges what another device remembered of `model` into this policy's memory, before the model
  // is inserted here: kdf keeps the larger of the two counts, both decayed to the later time.
  // Ignored for a resident model, and by the policies without such a memory.
  virtual void remember(const std::string& model, const history& h) {
    (void)model;
    (void)h;
  }

  // The time scale the policy measures for itself, in seconds: kdf's characteristic time T (0
  // before its first eviction); 0 for policies without one. share_time_scale gives it one to use
  // instead: a cluster's instances agree on one (the geometric mean of theirs), so that their
  // values compare and placement can weigh one instance's victims against another's. 0 returns to
  // the policy's own. Policies without a time scale ignore it.
  virtual double time_scale() const { return 0; }
  virtual void share_time_scale(double seconds) { (void)seconds; }

  // The re-scoring interface, or null for policies without periodic scores.
  virtual rescoring* rescorer() { return nullptr; }

  // The device's capacity changed (a model runtime reported another): policies that size their
  // history by it (arc's ghost lists, kdf-adaptive's shadow caches) follow it. The others ignore
  // it.
  virtual void set_capacity(std::uint64_t bytes) { (void)bytes; }
};

// The policies' names, in the order docs/policies.md lists them.
const std::vector<std::string>& policy_names();

// A policy by name; invalid_argument listing the known names otherwise.
expected<std::unique_ptr<cache_policy>> make_policy(std::string_view name,
                                                    const policy_options& options = {});

}  // namespace warm
