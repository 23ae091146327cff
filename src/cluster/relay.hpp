// The relay of cluster mode (docs/cluster.md): a Cap'n Proto inference for a model that
// a peer holds (and this instance does not) is sent to that peer straight from the RPC thread,
// on the RPC thread's own connections, its request and answer copied message to message. The
// runtime never sees it, and no other thread is woken: a forward costs one more RPC, not two
// thread hand-offs besides. HTTP and gRPC requests, cold misses (placement) and requests whose
// holder this instance's record lags on still go through the runtime's miss handler.
//
// Contract (rpc::server_options::relay):
//  - Takes a call only when it is not marked forwarded (one hop), the model is not held here, and
//    a live peer holds it (cluster::choose_holder, by this thread's and the peer client's requests
//    in flight to each). The request goes out marked forwarded.
//  - A peer that cannot be reached, breaks, answers unavailable or does not answer within
//    call_timeout does not fail the request: the runtime here serves it (counted fell back).
//  - Lives on the RPC thread and is destroyed there, before its event loop.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cluster/peer_links.hpp"
#include "rpc/server.hpp"

namespace warm::cluster {

class cluster_mode;

// Made with std::make_shared (its calls hold a reference to it).
class rpc_relay : public std::enable_shared_from_this<rpc_relay> {
 public:
  // `cluster` is borrowed and must outlive the relay; after cluster_mode::leave nothing is relayed.
  // `log` is told of each request that fell back (may be empty).
  rpc_relay(kj::AsyncIoProvider& io, cluster_mode& cluster, std::string token,
            std::shared_ptr<const peer_tls> tls, std::chrono::milliseconds call_timeout,
            std::function<void(const std::string&)> log);

  kj::Maybe<kj::Promise<void>> infer(rpc::infer_context context,
                                     std::function<kj::Promise<void>()> serve_here);

  // Requests in flight from this relay to `address`.
  std::uint32_t in_flight(const std::string& address) const;

 private:
  cluster_mode& cluster_;
  peer_links links_;
  std::chrono::milliseconds call_timeout_;
  std::function<void(const std::string&)> log_;
  std::map<std::string, std::uint32_t> in_flight_;

  void finished(const std::string& address);
};

}  // namespace warm::cluster
