// Placement claims in etcd (docs/cluster.md): what the placer, the copy scaler and a draining
// instance share. One object reads the cluster's placement state in one etcd read, decides with
// cluster::decide_placement (miss_placement.hpp) and claims the model by one transaction; it
// records failed loads and changes of a model's copies.
//
// Contract:
//  - Not thread-safe: each driver (the placer actor, the copy scaler actor, a drain on warmd's
//    main thread) owns its own, over one shared kv_store and one set of counters.
//  - Every call blocks on the store: only on a thread that may wait (a detached actor's, or
//    the main thread), never on a CAF scheduler thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/copy_rule.hpp"
#include "cluster/membership.hpp"
#include "cluster/miss_placement.hpp"
#include "cluster/store.hpp"
#include "warm/error.hpp"

namespace warm::cluster {

// What this instance's cluster mode did, for Warm.clusterInfo and /metrics: written by the
// drivers, read by anyone.
struct cluster_counters {
  std::atomic<std::uint64_t> placements{0};   // claims this instance won (copies' among them)
  std::atomic<std::uint64_t> claims_lost{0};  // claims another instance won first
  std::atomic<std::uint64_t> adopted{0};      // loads asked for hot models of instances that went
  std::atomic<std::uint64_t> transitions_resumed{0};  // vmodel transitions set again after one went
  std::atomic<std::uint64_t> copies_added{0};         // copies asked for on other instances
  std::atomic<std::uint64_t> copies_dropped{0};       // copies dropped here
};

// Errors of a load that another instance may not have: its device, its copy of the file.
bool instance_failure(errc code);

// How long a failed load keeps placement away from its instance (ModelMesh's failure expiry).
constexpr std::int64_t failure_life_ms = 15 * 60 * 1000;

std::int64_t now_unix_ms();

// A warning line at most every 30 s (what etcd being down would otherwise repeat per request).
// Not thread-safe: one per owner.
class throttled_log {
 public:
  explicit throttled_log(std::function<void(const std::string&)> log = {}) : log_(std::move(log)) {}
  void operator()(const std::string& line);

 private:
  std::function<void(const std::string&)> log_;
  std::chrono::steady_clock::time_point last_{};
};

// The members as `status` lists them, this instance marked draining when `draining` (its record
// may not say so yet).
std::vector<member> members_now(membership_status& status, bool draining);

class placement_claims {
 public:
  struct options {
    kv_store* store = nullptr;  // borrowed, shared
    std::string root;           // the cluster's keys (cluster_root)
    std::string instance;       // this instance's name
    std::chrono::milliseconds claim_life{60000};
    cluster_counters* counters = nullptr;          // borrowed, shared
    std::function<void(const std::string&)> warn;  // the owner's (throttled) warnings; may be empty
  };
  explicit placement_claims(options o);

  const options& settings() const { return o_; }

  // With a guard, the claim's transaction also compares the guard's key with its revision and
  // writes its value; when another writer changed that key meanwhile, place() answers
  // invalid_argument "changed" and claims nothing.
  struct guard {
    std::string key;
    std::int64_t revision = 0;
    std::string value;
  };
  // Decides where in.model goes and claims it when that is the decision: one transaction on the
  // claim's key and the chosen instance's placement key, tried again on a fresh read when another
  // placement changed either (up to 5 times; then serve_here). What it returns is final:
  // serve_here, follow, or a claim made. Claims and placement keys go on `lease` (0: none).
  // `known`: failures this instance knows of besides those in etcd (perhaps not written yet).
  expected<placement_decision> place(placement_inputs& in, std::int64_t lease,
                                     const std::vector<known_failure>& known,
                                     const guard* g = nullptr);

  // Records a failed load of `model` on `instance` in etcd, on `lease`: every instance's placement
  // passes that instance over for the model while the record lives. Failures are warned.
  void record_failure(const std::string& model, const std::string& instance, const error& why,
                      std::int64_t lease);

  // A model's copies (copy_rule.hpp) as read from etcd: its last change (nullopt: none) and its
  // key's mod_revision (0 when absent).
  struct copies_read {
    std::optional<copies_change> last;
    std::int64_t revision = 0;
  };
  expected<copies_read> copies_of(const std::string& model);
  // The basis of a change of copies: the revision read and the copies counted then.
  struct copies_basis {
    std::int64_t revision = 0;
    std::uint32_t copies = 1;
  };
  // The change to write when `count` copies are added on that basis.
  guard copies_guard(const std::string& model, const copies_basis& basis, std::size_t count) const;
  // Records that this instance drops its copy of `model` (compared against basis.revision), on
  // `lease`. true: the caller unloads it; false: another holder changed the copies first, or etcd
  // failed (warned).
  bool drop_copy(const std::string& model, const copies_basis& basis, std::int64_t lease);

 private:
  // Reads every claim, placement key and failure into `in` (one read), `known` besides.
  expected<void> read_placement(placement_inputs& in, const std::vector<known_failure>& known);
  void warn(const std::string& line) const;

  options o_;
};

// A driver's claims whose warnings go through `warn`, the driver's own throttled log (one
// throttle for everything the driver says; it must outlive the claims).
std::unique_ptr<placement_claims> claims_warning_to(placement_claims::options o,
                                                    throttled_log& warn);

}  // namespace warm::cluster
