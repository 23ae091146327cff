// warmd's Cap'n Proto connections: what a listener accepts, and the bounds a connection lives
// under before and after its client logs in. Lives on the RPC thread (service.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <capnp/message.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include "rpc/authenticator.hpp"
#include "rpc/server.hpp"
#include "rpc/tls_context.hpp"

namespace warm::net {
class login_limiter;
}

namespace warm::warmd {

// The largest message a connection that has not logged in may send: an authenticate call with a
// token is a few hundred bytes. A larger frame header closes the connection before its body is
// read or allocated.
inline constexpr std::uint64_t login_message_bytes = 64 << 10;

// Connections open now, shared by every acceptor of a service (RPC thread only).
struct connection_counts {
  std::uint32_t open = 0;             // every connection
  std::uint32_t unauthenticated = 0;  // connections of token listeners that have not logged in
  std::map<std::string, std::uint32_t> unauthenticated_by_peer;  // the same, by peer address (> 0)
};

// Whether a new connection from `peer` may wait to log in, given `max` pending logins in all;
// empty when it may, else why not (for the log). So that one address cannot keep every other
// client out: an address holds at most max / 8 pending logins (at least 1), and the last quarter
// of them is kept for addresses that hold none. Pure.
std::string refuse_pending_login(const connection_counts& counts, const std::string& peer,
                                 std::uint32_t max);

struct acceptor_options {
  rpc::server_options server;
  capnp::ReaderOptions receive;  // what a connection reads with (after login, where one is needed)
  // Non-empty: the listener is open to remote clients. Each connection starts at an Authenticator
  // (rpc::authenticator), may send messages of login_message_bytes at most, and is closed if it
  // has not logged in within login_timeout.
  std::string token;
  std::chrono::nanoseconds login_timeout = std::chrono::seconds(5);
  std::uint32_t max_connections = 1024;         // past it a new connection is closed at once
  std::uint32_t max_unauthenticated = 64;       // token listeners: pending logins at once
  std::shared_ptr<net::login_limiter> limiter;  // failed logins (null: none counted)
  std::string cluster_address;                  // where the cluster's instances reach this one
  // Set: every connection begins with a TLS handshake, made with the context this returns when
  // the connection is accepted (a reload changes it for the connections that come next). The
  // handshake counts as an open connection, and with a token as a pending login, from accept to
  // its end; one not done within the context's timeout is closed. Empty: plain TCP.
  std::function<std::shared_ptr<rpc::tls_server>()> tls;
};

// Serves the Warm interface (through an Authenticator where a token is set) on every connection
// a receiver accepts: one rpc::warm_server per connection (its watchers counted per connection
// and in `all_watchers`), reading with `options.receive` — unlike capnp::TwoPartyServer, whose
// reader uses Cap'n Proto's defaults and drops a client whose message is larger instead of
// letting the server answer it tooLarge. Connections over the limits are closed on accept and
// logged. Lives on the RPC thread; destroying it closes every connection it accepted.
class rpc_acceptor {
 public:
  // `rt`, `timer` and `counts` are borrowed and must outlive the acceptor.
  rpc_acceptor(warm::runtime& rt, kj::Timer& timer, acceptor_options options,
               rpc::in_flight_counter in_flight, std::shared_ptr<std::uint32_t> all_watchers,
               connection_counts& counts);
  ~rpc_acceptor();

  // Accepts until the promise is dropped. An accept that fails (out of file descriptors: EMFILE,
  // ENFILE; out of memory) is logged and tried again after a pause that doubles from 10 ms to 1 s
  // while it keeps failing: the waiting connections stay in the kernel's backlog, and the listener
  // never stops for good while the process lives.
  kj::Promise<void> listen(kj::ConnectionReceiver& receiver);

  // Messages (replies, events) queued on the open connections and not yet written to their
  // sockets: a stop waits for 0 before closing the connections, so that the answers of the calls
  // it let finish reach their clients.
  std::size_t unsent_messages() const;

 private:
  struct connection;
  struct handshake;
  // Admits an accepted stream (the limits), then serves it: at once, or after its TLS handshake.
  void serve(kj::Own<kj::AsyncIoStream>&& stream);
  // Serves an admitted stream (plain, or TLS once its handshake is done).
  void start(kj::Own<kj::AsyncIoStream>&& stream, const std::string& peer);

  warm::runtime& rt_;
  kj::Timer& timer_;
  acceptor_options options_;
  rpc::in_flight_counter in_flight_;
  std::shared_ptr<std::uint32_t> all_watchers_;
  connection_counts& counts_;
  std::set<connection*> live_;  // every open connection (each removes itself)
  std::chrono::milliseconds accept_pause_{
      0};  // the next pause after a failed accept (0: none failed)
  std::chrono::steady_clock::time_point last_handshake_log_{};  // the last failed handshake logged
  kj::Own<kj::TaskSet::ErrorHandler> errors_;
  kj::Own<kj::TaskSet> tasks_;
};

}  // namespace warm::warmd
