// warmd's part in a cluster (--cluster, docs/cluster.md): its membership, started from the flags,
// and its answer to Warm.clusterInfo. Built with the etcd client (WARM_HAVE_CLUSTER); without it,
// --cluster is a usage error.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <kj/async-io.h>

#include "config.hpp"
#include "copies.hpp"
#include "peers.hpp"
#include "placer.hpp"
#include "rpc/server.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class registry_storage;
}
namespace warm::node {
class membership;
}

namespace warm::warmd {

class cluster_mode {
 public:
  // Joins the cluster the flags name, for the runtime `rt` (borrowed; it must outlive this).
  // invalid_argument for bad flags (names, an address that cannot be advertised). Does not wait
  // for etcd: an instance whose etcd is down serves alone and joins once etcd answers.
  // `token` is the cluster's (the listeners' token): forwards present it to peers reached over TCP
  // with remote access. `tls`: peers reached over TCP are dialled with TLS (peer_tls.hpp); null:
  // without.
  static expected<std::unique_ptr<cluster_mode>> start(
      const config& c, runtime& rt, std::string token,
      std::shared_ptr<const peer_tls> tls = nullptr);
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
  // Leaves the cluster: revokes the lease, so the record goes at once, and stops forwarding
  // (forwards in flight are answered unavailable). Later info() calls answer with the cluster's
  // name and an empty view.
  void leave();

  // runtime_options::miss_handler: a miss for `model` goes to a live peer that holds it (not
  // draining; the one with the fewest of this instance's forwards in flight, then the fewest
  // loads in flight, then by name), answered from there. When no
  // instance holds it, placement decides which instance loads it (placer.hpp): one load
  // cluster-wide however many instances the requests arrive at. false (serve it here) only once
  // the cluster is left. Never blocks: forwards run on the peer client's thread, placement on its
  // own, and a peer that cannot serve a request sends it back here.
  bool forward(const std::string& model, infer_request& request, callback<infer_result>& done);

  // For the RPC thread's relay (relay.hpp): the address of the peer a request for `model` goes
  // to when this instance does not hold it and a live peer does (node::choose_holder by
  // `requests`, the relay's requests in flight to each, plus the peer client's); "" otherwise
  // (the runtime serves it: held here, a cold miss for placement, or the cluster left).
  std::string relay_address(
      const std::string& model,
      const std::function<std::uint32_t(const std::string& address)>& requests) const;
  // Counts a request the relay sent: answered by the peer, or served here instead.
  void relayed(bool answered);
  // service_options::relay_factory: the relay on the RPC thread, reaching peers with `token`.
  std::function<decltype(rpc::server_options::relay)(kj::AsyncIoProvider&)> relay_factory(
      std::string token);

 private:
  cluster_mode(std::string name, runtime& rt, std::unique_ptr<node::membership> m,
               std::unique_ptr<peer_client> peers, std::unique_ptr<placer> placing,
               std::unique_ptr<copy_scaler> copies);
  std::string name_;
  runtime& rt_;
  mutable std::mutex mutex_;
  std::unique_ptr<node::membership> membership_;
  std::unique_ptr<peer_client> peers_;
  std::unique_ptr<placer> placer_;       // borrows membership_ and peers_: destroyed before them
  std::unique_ptr<copy_scaler> copies_;  // borrows placer_ and membership_: destroyed first
  // How the membership's watch reaches the placer when an instance goes.
  struct adoption_hook {
    std::mutex mutex;
    placer* placing = nullptr;
  };
  std::shared_ptr<adoption_hook> adopter_;
  std::atomic<std::uint64_t> relay_answered_{0}, relay_fell_back_{0};
  std::shared_ptr<const peer_tls> tls_;  // null: peers are dialled without TLS
};

// The registry of the cluster the flags name, kept in etcd and shared by its instances
// (node/etcd_registry.hpp): runtime_options::registry_store in cluster mode. Its changes and
// failures are logged.
expected<std::unique_ptr<registry_storage>> cluster_registry(const config& c);

// The address peers reach this instance at: --advertise, else the first --listen, a relative
// unix socket path made absolute. invalid_argument when neither gives one.
expected<std::string> advertised_address(const config& c);

}  // namespace warm::warmd
