// kj's TLS for Cap'n Proto connections: a server context made from the certificates warmd was
// given (net/tls.hpp), and a client context for warmctl and for warmd's links to its peers.
// kj::TlsContext borrows its keypair and trusted certificates; the structs here own them with it,
// so a context can be handed around (and replaced on reload) as one shared object.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <kj/compat/tls.h>
#include <kj/timer.h>

namespace warm::net {
struct tls_material;
}

namespace warm::rpc {

// A server's TLS context and what it borrows. Lives on the thread of the event loop that uses it
// (the RPC thread); shared_ptr so that handshakes begun with it keep it alive across a reload.
struct tls_server {
  std::optional<kj::TlsKeypair> keypair;
  std::vector<kj::TlsCertificate> client_cas;
  kj::Own<kj::TlsContext> context;
};

// A context serving `material`'s certificate chain; with material.client_ca_pem, clients must
// present a certificate one of those CAs signed (the system's roots are not trusted for that). A
// handshake not done within `handshake_timeout` fails. Throws kj::Exception when a PEM block does
// not parse (load_tls has checked them already).
std::shared_ptr<tls_server> make_tls_server(const net::tls_material& material, kj::Timer& timer,
                                            std::chrono::nanoseconds handshake_timeout);

// How a client checks the server and proves itself.
struct tls_client_options {
  std::string ca_pem;    // trusted CAs; empty: the system's roots
  std::string cert_pem;  // the client's certificate chain, for mutual TLS; empty: none
  std::string key_pem;   // its key
};

// A client's TLS context and what it borrows.
struct tls_client {
  std::optional<kj::TlsKeypair> keypair;
  std::vector<kj::TlsCertificate> trusted;
  kj::Own<kj::TlsContext> context;
};

// A client context for `options`. Throws kj::Exception when a PEM block does not parse.
std::shared_ptr<tls_client> make_tls_client(const tls_client_options& options);

}  // namespace warm::rpc
