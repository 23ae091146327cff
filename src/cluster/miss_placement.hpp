// Where a cluster serves a miss for a model that no instance holds (docs/cluster.md). Pure logic
// over the instances' records and the placement claims in etcd; the cluster mode reads both, acts
// on the decision and writes the claim.
//
// The rule, for one model:
//  1. A live claim for it decides: its instance serves the request (it loads the model once, and
//     every request that arrives anywhere meanwhile waits on that load). A claim is live for
//     claim_life after it was made while its instance is a live member and not draining.
//  2. Otherwise the model is placed with ranking::rank_instances (the warm rule) over every
//     member's record (where the cost is equal, an instance whose disk tier holds the model's file,
//     instance_record::tiered, goes first: it loads without fetching), and the first is claimed:
//     one transaction comparing the claim's key and the chosen instance's placement key with the
//     revisions seen here. When instances place the same model at once one claim wins and the
//     others follow it; when they place different models on the same instance from the same view,
//     one wins and the others read again and decide with its reservation (rule 3), so concurrent
//     placements cannot herd.
//  3. Reservations: a live claim for another model counts its bytes as reserved on its instance,
//     and its load as queued there, until that instance publishes a record written after the
//     claim (a record that already counts the load), or lists the model as resident. So 50 cold
//     models placed at once spread over the instances instead of herding onto the one that looked
//     emptiest.
//  4. Failures: an instance where the model's load failed within failure_life is no candidate
//     for it, and a claim naming it is not live (the model is placed again elsewhere).
//  5. Excluded instances (those that hold the model already, when a copy is placed) are no
//     candidates either, and a claim naming one is not followed.
// With no member to place on (not joined yet, or every member draining) the request is served here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cluster/records.hpp"
#include "ranking/ranking.hpp"

namespace warm::cluster {

// A failed load of `model` on `instance`, as read from etcd (or just seen by this instance).
struct known_failure {
  std::string model;
  std::string instance;
  std::int64_t failed_unix_ms = 0;
};

// A claim as read from etcd.
struct known_claim {
  std::string model;
  placement_claim claim;
  std::int64_t mod_revision = 0;  // of its key
};

struct placement_inputs {
  std::vector<member> members;      // live instances, this one among them (self) once joined
  std::vector<known_claim> claims;  // every claim in etcd
  // Each instance's placement key revision (placed_key; absent: the key does not exist).
  std::map<std::string, std::int64_t> placed_revisions;
  std::string model;
  ranking::placement_request request;
  std::int64_t now_unix_ms = 0;
  std::int64_t claim_life_ms = 60000;
  std::vector<known_failure> failures;
  std::int64_t failure_life_ms = 15 * 60 * 1000;
  std::vector<std::string> excluded;  // instances that are no candidates (rule 5)
};

struct placement_decision {
  enum class action {
    serve_here,  // this instance serves it (and loads it)
    follow,      // a live claim names another instance: forward the request there
    claim,       // claim the model for `instance` (compare-and-set), then serve or forward
  };
  action what = action::serve_here;
  std::string instance;  // follow, claim: the instance that loads the model
  std::string address;   // follow, claim: where it is reached
  bool self = false;     // claim: the instance is this one
  // claim: the claim key's mod_revision to compare against (0: it must not exist), and the
  // chosen instance's placement key's.
  std::int64_t expected_revision = 0;
  std::int64_t placed_revision = 0;
};

placement_decision decide_placement(const placement_inputs& in);

// The copy a miss is forwarded to, among `holders` (by name): not this instance, not draining;
// the fewest requests in flight to it from this instance (`requests`, asked only when there is a
// choice), then the fewest loads in flight, then the first by name. nullptr when none is left.
const holder* choose_holder(
    const std::vector<holder>& holders,
    const std::function<std::uint32_t(const std::string& address)>& requests);

// Whether `c` still decides where its model loads (rule 1), among `members`.
bool claim_is_live(const known_claim& c, const std::vector<member>& members,
                   std::int64_t now_unix_ms, std::int64_t claim_life_ms);

}  // namespace warm::cluster
