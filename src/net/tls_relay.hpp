// TLS for a server that takes plaintext connections by descriptor (gRPC's AddInsecureChannelFromFd,
// the only way Debian's gRPC 1.51 takes a socket it did not accept): the relay does each accepted
// TCP socket's handshake, then carries the bytes both ways between the TLS session and a unix
// socketpair, whose other end it hands to the server. The server sees a plain stream; the client
// sees TLS from the first byte.
//
//   - Handshakes run on the relay's one thread, never block, and must finish within
//     handshake_timeout; a peer address holds at most max_handshakes_per_peer of them at once (a
//     connection past it is closed at once), so one client cannot keep the others' out.
//   - A connection is handed over (`ready`) only once its handshake has succeeded: nothing a client
//     sends before reaches the server.
//   - Each direction holds at most one read (64 KiB) that the other side has not taken: a slow
//     reader slows its writer, and a connection never holds more than that much per direction
//     beyond OpenSSL's own buffers.
//   - Either side's end of stream ends the other's: a client's close_notify or FIN shuts the
//     socketpair's write side; the server's closing (or shutting) its end sends close_notify, and
//     the TCP socket is closed once both directions are done, or at once when either fails.
//   - The relay closes every socket it holds (TCP sockets and its ends of the pairs); the ends it
//     handed over are the server's.
//
// One thread serves every connection of a relay: its encryption bounds the front's TLS throughput
// to about one core.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "warm/error.hpp"

namespace warm::net {

class ssl_server;

struct relay_options {
  std::chrono::milliseconds handshake_timeout{5000};
  std::size_t max_handshakes_per_peer = 64;
  // Told of failed handshakes (at most one line a second, with the count since) and refused
  // connections; may be empty. Runs on the relay's thread.
  std::function<void(const std::string&)> log;
};

class tls_relay {
 public:
  // Called on the relay's thread once `tcp_fd`'s handshake has succeeded, with `plain_fd`: the
  // server's end of the socketpair (non-blocking, close-on-exec), owned by the callee from then on.
  // `tcp_fd` stays the relay's; it is named so that the caller can tell which connection it was.
  using ready_fn = std::function<void(int tcp_fd, int plain_fd)>;

  // Starts the relay's thread, serving sessions of `server` (not null). unavailable when a thread,
  // an eventfd or memory cannot be had.
  static expected<std::unique_ptr<tls_relay>> start(std::shared_ptr<const ssl_server> server,
                                                    ready_fn ready, relay_options options = {});
  ~tls_relay();  // stop()s

  // Takes an accepted TCP socket, and owns it from then on; `peer` is its client's address (what
  // max_handshakes_per_peer counts). Its handshake begins on the relay's thread. Thread-safe; after
  // stop() the socket is closed at once.
  void add(int tcp_fd, std::string peer);

  // Sessions of `server` for the connections added from now on; those open keep theirs.
  // Thread-safe.
  void set_server(std::shared_ptr<const ssl_server> server);

  // Connections the relay holds: handshakes and relayed ones. Thread-safe.
  std::size_t connections() const;

  // Closes every connection (without close_notify) and joins the thread. Idempotent.
  void stop();

  struct impl;

 private:
  explicit tls_relay(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::net
