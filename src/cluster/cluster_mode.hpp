// An instance's part in a cluster (docs/cluster.md): its membership, its peers, the placer and the
// copy scaler, started together and left together; what the runtime's miss handler, the RPC
// relay, Warm.clusterInfo and /metrics ask of the cluster. Built with the etcd client
// (WARM_HAVE_CLUSTER).
//
// Threads: the membership's session and watch threads, the peer client's kj thread, and two
// detached actors in the runtime's actor system (the placer and the copy scaler). Every public
// method is thread-safe; only start, drain and leave wait on etcd.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <kj/async-io.h>

#include "cluster/claims.hpp"
#include "cluster/copy_rule.hpp"
#include "cluster/copy_scaler_protocol.hpp"
#include "cluster/placer_protocol.hpp"
#include "etcd/client.hpp"
#include "rpc/server.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"
#include "warm/runtime_types.hpp"

namespace warm::cluster {

class membership;
class peer_client;
class peer_tls;

struct cluster_options {
  etcd::options etcd;  // the cluster's etcd: endpoints and access (TLS files, user, password)
  std::string cluster = "warm";  // the cluster's name
  std::string instance;          // this instance's name; "": the host name
  std::string address;           // where peers reach this instance (advertised)
  std::string version;           // warm's version, for the record
  std::chrono::seconds lease_ttl{10};
  copy_rule copies;  // rule.add_queue 0: no copies are added or dropped
  // The cluster's token (the listeners'): forwards present it to peers reached over TCP with
  // remote access. Empty: none.
  std::string token;
  // Peers reached over TCP are dialled with TLS (peer_tls.hpp); null: without.
  std::shared_ptr<const peer_tls> tls;
};

class cluster_mode {
 public:
  // Joins the cluster for the runtime `rt` (borrowed; it must outlive this). invalid_argument for
  // bad options (names, rule, etcd access). Does not wait for etcd: an instance whose etcd is down
  // serves alone and joins once etcd answers.
  static expected<std::unique_ptr<cluster_mode>> start(cluster_options o, runtime& rt);
  ~cluster_mode();

  // This instance's view of the cluster (Warm.clusterInfo); answers at once, on the caller's
  // thread.
  void info(callback<cluster_info> done) const;
  // The cluster's families for /metrics (Prometheus text): forwards by outcome, placements, lost
  // claims, live instances and model copies.
  std::string metrics_text() const;
  // Drains this instance before it leaves (SIGTERM): marks it draining (no new placements here,
  // and peers stop forwarding to it; what still arrives is served, a miss placed elsewhere), then
  // loads its recent models (used within the last 15 minutes or in use now; most valuable
  // first: the policy's value where it publishes one, else the most recently used) on other
  // instances, waiting at most `budget`. Blocks the caller; logs what moved.
  void drain(std::chrono::seconds budget);
  // Leaves the cluster: stops the placer (serving what it holds here) and the copy scaler,
  // revokes the lease, so the record goes at once, and stops forwarding (forwards in flight are
  // answered unavailable). Later info() calls answer with the cluster's name and an empty view.
  void leave();

  // runtime_options::miss_handler: a miss for `model` goes to a live peer that holds it (not
  // draining; the one with the fewest of this instance's forwards in flight, then the fewest
  // loads in flight, then by name), answered from there. When no instance holds it, the placer
  // decides which instance loads it: one load cluster-wide however many instances the requests
  // arrive at. false (serve it here) only once the cluster is left. Never blocks: forwards run on
  // the peer client's thread, placement in its actor, and a peer that cannot serve a request
  // sends it back here.
  bool forward(const std::string& model, infer_request& request, callback<infer_result>& done);

  // For the RPC thread's relay (relay.hpp): the address of the peer a request for `model` goes
  // to when this instance does not hold it and a live peer does (choose_holder by `requests`, the
  // relay's requests in flight to each, plus the peer client's); "" otherwise (the runtime serves
  // it: held here, a cold miss for placement, or the cluster left).
  std::string relay_address(
      const std::string& model,
      const std::function<std::uint32_t(const std::string& address)>& requests) const;
  // Counts a request the relay sent: answered by the peer, or served here instead.
  void relayed(bool answered);
  // service_options::relay_factory: the relay on the RPC thread, reaching peers with the token.
  std::function<decltype(rpc::server_options::relay)(kj::AsyncIoProvider&)> relay_factory();

  struct parts;

 private:
  cluster_mode(std::string name, runtime& rt, std::unique_ptr<parts> p);
  std::string name_;
  runtime& rt_;
  mutable std::mutex mutex_;
  std::unique_ptr<parts> parts_;  // null once left
  std::string token_;
  std::shared_ptr<const peer_tls> tls_;
  std::atomic<std::uint64_t> relay_answered_{0}, relay_fell_back_{0};
};

// The address peers reach this instance at: `advertise`, else the first of `listen`, a relative
// unix socket path made absolute. invalid_argument when neither gives one.
expected<std::string> advertised_address(const std::string& advertise,
                                         const std::vector<std::string>& listen);

}  // namespace warm::cluster
