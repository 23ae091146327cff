// warmd's RPC thread: one kj event loop (kj::setupAsyncIo) on its own kj::Thread, with an
// acceptor per listen address (a two-party Cap'n Proto server reading with receive_options),
// serving warm::rpc::warm_server over a runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <kj/async-io.h>

#include "rpc/server.hpp"
#include "warm/error.hpp"

namespace warm {
class runtime;
}
namespace warm::net {
class login_limiter;
struct tls_material;
}  // namespace warm::net

namespace warm::warmd {

// A listen address: "unix:PATH" or "HOST:PORT" ("[::1]:PORT" for IPv6).
struct listen_address {
  bool is_unix = false;
  std::string path;  // unix
  std::string host;  // tcp
  std::uint16_t port = 0;
  std::string text;  // as given
};

// invalid_argument for anything else (empty path, bad or missing port).
expected<listen_address> parse_listen_address(const std::string& text);
// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

// How many times a request's bytes count against Cap'n Proto's traversal limit while the server
// handles it: the size check (totalSize), the tensor limit check and the copy each read the data.
inline constexpr std::uint64_t receive_read_factor = 4;

// What the RPC connections read with: messages up to max_request_bytes × receive_read_factor
// plus 1 MiB. A request over max_request_bytes (or with a tensor over max_tensor_bytes) within
// that is read and answered tooLarge; a larger one makes Cap'n Proto drop the connection, since
// it cannot be read without holding it in memory.
capnp::ReaderOptions receive_options(const rpc::server_options& server);

struct service_options {
  std::vector<std::string> listen{"unix:./warm.sock"};
  bool allow_remote = false;  // TCP may bind non-loopback hosts; its clients must authenticate
  std::string token;          // required (non-empty) with allow_remote
  rpc::server_options server;
  double drain_seconds = 30;  // how long stop() waits for in-flight calls
  // Connections open at once, all listeners together; a new one past it is closed on accept.
  std::uint32_t max_connections = 1024;
  // With allow_remote (TCP clients must log in): connections not yet logged in, at once; a new one
  // past it is closed on accept. Such a connection may send messages of login_message_bytes
  // (acceptor.hpp) at most and is closed when it has not logged in within login_timeout.
  std::uint32_t max_pending_logins = 64;
  std::chrono::nanoseconds login_timeout = std::chrono::seconds(5);
  std::shared_ptr<net::login_limiter> limiter;  // failed logins per peer (null: not limited)
  // In a cluster: the address its instances reach this one at (--advertise), which their logins
  // name (rpc::login_options::cluster_address). Empty: outside a cluster.
  std::string cluster_address;
  // Makes server.relay on the RPC thread once its event loop runs (warmd's cluster relay connects
  // to peers on that loop); destroyed there before the loop. Empty: server.relay as given.
  std::function<decltype(rpc::server_options::relay)(kj::AsyncIoProvider&)> relay_factory;
  // TCP listeners serve TLS with these certificates (net/tls.hpp; with a client CA, clients must
  // present a certificate it signed); the TLS handshake must end within login_timeout. Unix
  // sockets stay plain. Null: plain TCP.
  std::shared_ptr<const net::tls_material> tls;
};

// Owns the RPC thread. Thread-safe to stop() from any other thread, once.
class service {
 public:
  // Validates the addresses (loopback-only TCP unless allow_remote; a token with allow_remote),
  // starts the thread and binds every listener before returning: TCP listeners first, then unix
  // sockets, so a unix socket that accepts means every listener is up. Unix sockets are created
  // with mode 0600; a stale socket file (nobody accepting) is replaced, a live one is an error.
  // `rt` is borrowed and must outlive the service.
  static expected<std::unique_ptr<service>> start(warm::runtime& rt, service_options options);
  ~service();  // stop()s if needed

  // Stops accepting, removes the unix socket files, lets in-flight calls finish (up to
  // drain_seconds), closes the connections and joins the thread.
  void stop();

  // The bound addresses in binding order: TCP (with the actual port, e.g. for port 0), then unix.
  const std::vector<std::string>& bound() const;

  // Serves TLS with `tls` on the TCP listeners from the next connection on (connections open and
  // handshakes begun keep the certificates they began with). Only where the service was started
  // with TLS; invalid_argument otherwise, or when kj cannot make a context of `tls` (the old one
  // then stays). Waits for the RPC thread. Call it from the thread that calls stop() (warmd's main
  // thread), never during a stop: unavailable once stopped.
  expected<void> set_tls(std::shared_ptr<const net::tls_material> tls);

  struct impl;

 private:
  explicit service(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::warmd
