// The gRPC front's own accept loop. Debian's gRPC (1.51) stops accepting for good when accept4()
// fails with EMFILE or ENFILE, and it cannot cap the connections it holds, so warm listens
// itself and hands each connected socket to the server (grpc::AddInsecureChannelFromFd):
//
//   - an accept that fails for want of descriptors or memory is retried after a pause that
//     doubles from 10 ms to 1 s while it keeps failing (the waiting connections stay in the
//     kernel's backlog), and the listener never stops while the front lives;
//   - at most max_connections accepted sockets are open at once; past it a new connection is
//     closed at once. gRPC tells nobody when it closes a connection, so an accepted socket counts
//     as open while its descriptor still names the same socket (same inode): checked again when
//     the count reaches the limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "warm/error.hpp"

namespace warm::net {
class ssl_server;
}

namespace warm::grpc_front {

struct acceptor_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: any free port
  std::string unix_path;   // non-empty: a unix socket instead (net/listen.hpp), removed at stop
  std::size_t max_connections = 1024;
  // TCP only: serve TLS with this context (ALPN "h2"); null: plain. A handshake not done within
  // handshake_timeout is closed.
  std::shared_ptr<const net::ssl_server> tls;
  std::chrono::milliseconds handshake_timeout{5000};
  // Told of refused connections, failed accepts and the recovery from them (a line each, without
  // a trailing newline); may be empty.
  std::function<void(const std::string&)> log;
};

class fd_acceptor {
 public:
  // Binds and listens (unavailable when it cannot); accepts nothing until serve().
  static expected<std::unique_ptr<fd_acceptor>> listen(acceptor_options options);
  ~fd_acceptor();  // stop()s

  // Starts the accepting thread. `take` receives each accepted socket (non-blocking, close-on-exec,
  // TCP_NODELAY), or with TLS the plaintext end of its relay once its handshake succeeded, and owns
  // it from then on; it runs on the accepting thread, or with TLS on the relay's.
  void serve(std::function<void(int fd)> take);

  // New connections' TLS from now on (a reload); those open keep theirs. Ignored by an acceptor
  // that serves no TLS.
  void set_tls(std::shared_ptr<const net::ssl_server> tls);

  // Closes the listening socket and joins the thread. Accepted sockets are their owner's.
  void stop();

  std::uint16_t port() const;

  // The address of the client on socket `fd` (one that `take` received) while it is open; empty
  // otherwise.
  std::string peer(int fd);

  // Accepted sockets still open, as the last check saw them (checks them again first).
  std::size_t open_connections();

  struct impl;

 private:
  explicit fd_acceptor(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::grpc_front
