// warmctl's link to warmd: one kj event loop for the process and, on demand, one Cap'n Proto
// two-party connection to the daemon's `Warm` capability.
//
// Thread affinity: everything here belongs to the thread that created the session (kj's event
// loop is per thread). Errors: connecting and RPC transport failures surface as
// `connection_error` (exit status 2); a server-reported status is not an exception.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "warm.capnp.h"

namespace warm::ctl {

// The daemon is unreachable, refused the token, or the connection broke mid-call.
struct connection_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where and how to connect. Defaults match warmd's.
struct connect_options {
  std::string address = "unix:./warm.sock";  // "unix:PATH" or "HOST:PORT"
  std::string token_file;                    // non-empty: authenticate through `Authenticator`
  // How long connecting may take, up to the server's first answer (its bootstrap, or the
  // authentication): a listener that never accepts or never answers fails instead of hanging.
  std::chrono::milliseconds timeout{5000};
  // TLS to a HOST:PORT warmd serving --tls-cert: its certificate is checked against tls_ca (PEM;
  // empty: the system's roots) and must name tls_server_name (empty: HOST); for mutual TLS this
  // client presents tls_cert with tls_key. Implied by any of the four.
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool uses_tls() const {
    return tls || !tls_ca.empty() || !tls_cert.empty() || !tls_server_name.empty();
  }
  bool same_endpoint(const connect_options& o) const {
    return address == o.address && token_file == o.token_file && uses_tls() == o.uses_tls() &&
           tls_ca == o.tls_ca && tls_cert == o.tls_cert && tls_key == o.tls_key &&
           tls_server_name == o.tls_server_name;
  }
};

// One open connection. Owns the stream, the RPC system and the `Warm` client; destroying it
// closes the connection (and ends any watch the server runs for it).
class connection {
 public:
  // Connects and, when options.token_file is set, reads the token (surrounding whitespace
  // removed) and exchanges it for `Warm`. Throws connection_error naming the address.
  static std::unique_ptr<connection> open(kj::AsyncIoContext& io, const connect_options& options);

  warm::rpc::Warm::Client& warm() { return warm_; }
  const std::string& address() const { return address_; }
  // Resolves when the server closes the connection.
  kj::Promise<void> on_disconnect() { return network_->onDisconnect(); }
  // Whether the server has closed the connection, as far as the event loop has seen.
  bool lost() const { return lost_; }

  connection(kj::Own<kj::AsyncIoStream> stream, std::string address);

 private:
  std::string address_;
  kj::Own<kj::AsyncIoStream> stream_;
  kj::Own<capnp::TwoPartyVatNetwork> network_;
  kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc_;
  warm::rpc::Warm::Client warm_;
  bool lost_ = false;
  kj::Promise<void> watch_ = nullptr;  // sets lost_; destroyed first
};

// The process's event loop plus the (lazily opened, reused) connection. The REPL keeps one
// session across lines; one-shot mode uses it for one command.
class session {
 public:
  session();

  // The connection for `options`, opened on first use and reopened when the address or token
  // file changes or the previous connection broke — also when the server closed it since the
  // last command (a restarted warmd), so the REPL's next command just works. Throws
  // connection_error.
  connection& connect(const connect_options& options);
  // Forget the connection (after a transport error), so the next command reconnects.
  void drop() { conn_.reset(); }
  // The open connection, or nullptr: lets tab completion skip connecting.
  connection* current() { return conn_.get(); }

  kj::AsyncIoContext& io() { return io_; }
  kj::WaitScope& wait_scope() { return io_.waitScope; }

  // Waits for an RPC promise; a kj exception (disconnect, failed call) becomes connection_error.
  // The caller drops the connection once its requests are destroyed.
  template <class T>
  T wait(kj::Promise<T>&& promise) {
    try {
      return promise.wait(io_.waitScope);
    } catch (const kj::Exception& e) {
      throw transport_failure(e);
    }
  }

 private:
  connection_error transport_failure(const kj::Exception& e);

  kj::AsyncIoContext io_;
  connect_options options_;
  std::unique_ptr<connection> conn_;
};

}  // namespace warm::ctl
