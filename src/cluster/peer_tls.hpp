// TLS between the instances of a cluster: what an instance presents when it dials a peer (its own
// certificate and key, --tls-cert/--tls-key, as a client certificate) and what it trusts in the
// peer's (the CAs of --tls-client-ca, the same CAs its own listeners ask clients' certificates of;
// without them, the system's roots). A peer is checked against the host name of the address it
// advertises, which its certificate must carry as a DNS name (kj's TLS checks DNS names only).
//
// One object is shared by every thread that dials peers (the peer client's, the RPC thread's
// relay); each builds its own kj context from the current material (peer_tls_contexts). SIGHUP
// replaces the material for the connections dialled after it; those open keep theirs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "rpc/tls_context.hpp"
#include "warm/error.hpp"

namespace warm::net {
struct tls_material;
}

namespace warm::cluster {

class peer_tls {
 public:
  explicit peer_tls(const net::tls_material& material) { set(material); }

  // The certificates for connections dialled from now on. Thread-safe.
  void set(const net::tls_material& material);

  // The material as of now and its generation (which grows with every set). Thread-safe.
  std::pair<rpc::tls_client_options, std::uint64_t> current() const;

 private:
  mutable std::mutex mutex_;
  rpc::tls_client_options options_;
  std::uint64_t generation_ = 0;
};

// One thread's client context of a peer_tls, made again when the material changed. The thread's
// own (kj contexts stay on the thread that made them).
class peer_tls_contexts {
 public:
  explicit peer_tls_contexts(std::shared_ptr<const peer_tls> tls) : tls_(std::move(tls)) {}

  // The context for a new connection; throws kj::Exception when the PEM does not load (the
  // material was checked by net::load_tls, so only a kj-specific refusal).
  std::shared_ptr<rpc::tls_client> context();

 private:
  std::shared_ptr<const peer_tls> tls_;
  std::shared_ptr<rpc::tls_client> context_;
  std::uint64_t generation_ = 0;
};

// The host part of "HOST:PORT" or "[V6]:PORT".
std::string host_of(const std::string& address);

// Whether the instance may be dialled over TLS at `address` with `material`'s certificate: empty
// when it may (a unix socket needs none); otherwise why not: an IP address (peers check DNS names),
// or a host name the certificate does not carry.
std::string advertised_tls_problem(const std::string& address, const net::tls_material& material);

}  // namespace warm::cluster
