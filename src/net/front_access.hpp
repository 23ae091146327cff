// Where a network front listens and who may use it: what the HTTP and gRPC fronts' options
// begin with (each front's own options derive from it), and the rule both check before binding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace warm::net {

class login_limiter;
struct tls_material;

struct front_access {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: any free port
  // Non-empty: listen on this unix socket instead of host:port (net/listen.hpp: mode 0600,
  // and no token is asked there).
  std::string unix_path;
  bool allow_remote = false;  // bind a non-loopback host; needs a token
  std::string token;          // required with allow_remote; optional otherwise
  // Wrong tokens per client address, one budget shared by every front; null: not limited.
  std::shared_ptr<net::login_limiter> login_limiter;
  // TCP only (a unix socket stays plain): serve TLS with these certificates, and with
  // tls->client_ca_pem ask every client for a certificate one of those CAs signed (net/tls.hpp).
  // Null: plain TCP. A front's set_tls replaces it for the connections that come next.
  std::shared_ptr<const tls_material> tls;
};

// Why `access` may not be served ("gRPC address 0.0.0.0 is not loopback; …"): a non-loopback
// host without allow_remote, or allow_remote without a token (a unix socket is always allowed).
// Empty when it may. `front` names
// the front in the message ("HTTP", "gRPC").
std::string access_problem(const front_access& access, const std::string& front);

}  // namespace warm::net
