// TLS for warmd's fronts that speak it through OpenSSL (HTTP, gRPC): one server context per set of
// certificates (tls_material, read and checked by load_tls), and the sessions made from it on
// accepted sockets. The HTTP front's connection gate and the TLS relay (tls_relay.hpp) drive the
// handshakes and every read and write of those sessions.
//
// A context serves TLS 1.2 and 1.3 with the material's chain (leaf first) and key; with a client
// CA it asks every client for a certificate and refuses the handshake without one that a CA of
// that bundle signed (advertised to clients as the acceptable CAs; the system's roots do not
// count). ALPN: the context's one protocol ("http/1.1", "h2") when a client offers it; a client
// that offers ALPN without it is refused. Resumption: stateless tickets only (no session cache, so
// no memory per session on the server), under keys of this context alone, so a ticket from before
// a reload is not resumed after it. No renegotiation, no early data. A client that closes without
// close_notify reads as an end of stream (the protocol's own framing tells a cut message).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "warm/error.hpp"

namespace warm::net {

struct tls_material;

struct ssl_free {
  void operator()(SSL* s) const { SSL_free(s); }
};
using ssl_ptr = std::unique_ptr<SSL, ssl_free>;

class ssl_server {
 public:
  // A context for `material`, choosing `alpn` (a protocol name, at most 255 bytes).
  // invalid_argument, with OpenSSL's reason, when its PEM does not load (a chain, key or CA bundle
  // OpenSSL refuses).
  static expected<std::shared_ptr<const ssl_server>> make(const tls_material& material,
                                                          const std::string& alpn);
  ~ssl_server();
  ssl_server(const ssl_server&) = delete;
  ssl_server& operator=(const ssl_server&) = delete;

  // A server session on the accepted socket `fd`, in the accept state, its handshake not begun.
  // Its reads and writes of `fd` never block (MSG_DONTWAIT) nor raise SIGPIPE, whether the socket
  // blocks or not; the socket stays the caller's to close, after the session. The session holds
  // its own reference to the context, so it may outlive this object (a reload does not touch
  // connections already open). Null when OpenSSL is out of memory. Thread-safe.
  ssl_ptr open(int fd) const;

  const std::string& subject() const { return subject_; }  // the leaf's, as the material says

 private:
  ssl_server(SSL_CTX* ctx, std::string subject) : ctx_(ctx), subject_(std::move(subject)) {}
  SSL_CTX* ctx_;
  std::string subject_;
};

// OpenSSL's reason for the last failure on this thread ("certificate verify failed"), and clears
// this thread's error queue. "unknown" when the queue holds none.
std::string tls_error_text();

}  // namespace warm::net
