// Cap'n Proto connections to the cluster's other instances, on one kj event loop: the thread that
// made the peer_links uses them, and only it (the peer client's own thread, and warmd's RPC
// thread for the relay). A connection is opened at an address's first use and again after it
// broke. Peers reached over TCP with a token log in by proving that they hold the cluster's token,
// and check that the peer holds it too (net/peer_proof.hpp): the token is never sent. With TLS
// (peer_tls.hpp) every TCP connection is TLS first: the peer's certificate checked against the
// host it is dialled at, this instance's presented.
#pragma once

#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.h>
#include <kj/async-io.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cluster/peer_tls.hpp"
#include "warm.capnp.h"

namespace warm::cluster {

// One peer's connection. The members are destroyed in reverse order: the bootstrap's promise
// first, the stream last.
struct peer_link {
  std::string address;
  std::shared_ptr<rpc::tls_client> tls;  // with TLS: the context its stream was made with
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyVatNetwork> network;
  kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
  kj::Promise<void> watch = nullptr;
  bool lost = false;  // broken, or never connected: the next use connects again
  kj::ForkedPromise<rpc::Warm::Client> warm = nullptr;  // the peer's Warm, once connected
};

class peer_links {
 public:
  // `token`: empty when peers are reached without one (Unix sockets, loopback). `tls`: null when
  // peers are reached without TLS.
  peer_links(kj::AsyncIoProvider& io, std::string token, std::chrono::milliseconds connect_timeout,
             std::shared_ptr<const peer_tls> tls = nullptr);

  // The connection to `address` ("unix:PATH" or "HOST:PORT"): the open one, or a new one when
  // there is none or it broke. Its `warm` fails when the peer cannot be reached within the
  // connect timeout, fails the TLS handshake (its certificate not signed by a trusted CA or not
  // naming the host), refuses this instance's login, or cannot prove it holds the token. A caller
  // whose call on it fails marks it lost.
  std::shared_ptr<peer_link> get(const std::string& address);

  kj::Timer& timer() { return io_.getTimer(); }
  void clear() { links_.clear(); }

 private:
  kj::AsyncIoProvider& io_;
  std::string token_;
  std::chrono::milliseconds connect_timeout_;
  std::optional<peer_tls_contexts> tls_;
  std::map<std::string, std::shared_ptr<peer_link>> links_;
};

}  // namespace warm::cluster
