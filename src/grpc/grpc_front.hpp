// warm's gRPC front: the KServe V2 inference protocol (`inference.GRPCInferenceService`,
// schemas/kserve_v2.proto) with the model repository extension, over a warm::runtime. Served by
// gRPC's synchronous server on its own threads (never CAF's):
//
//   ServerLive, ServerReady                  the process serves; the runtime answers
//   ServerMetadata                           name, version, extensions
//   ModelMetadata, ModelReady                from the file header / the model's state; no load
//   ModelInfer                               FP32 input "input" [batch, width] or [width], as typed
//                                            fp32_contents or raw_input_contents; loads on demand
//   RepositoryIndex, RepositoryModelLoad,    as HTTP's repository routes
//   RepositoryModelUnload
//
// A model is a model id or a vmodel id; a version other than the one the model serves is
// NOT_FOUND. Errors map to gRPC codes as grpc_code() says. With a token every method but
// ServerLive and ServerReady needs the metadata "authorization: Bearer TOKEN" (UNAUTHENTICATED
// otherwise; wrong tokens count against the client's address in the shared login limiter).
//
// Nothing is parsed before it is allowed. Calls are served by gRPC's callback API as raw bytes:
// the method and the token are checked on a call's initial metadata, and a refused call is
// finished without its message being read. An allowed call's message is size-checked (64 KiB for
// every method but ModelInfer) and walked once against its descriptor (wire_bounds.hpp: entries
// per repeated field, entries in all, the memory parsing would take) before protobuf parses it.
// The calls run on the front's own `threads`; past `threads + queued_calls` in flight a call gets
// RESOURCE_EXHAUSTED at once. Connections are accepted by warm (fd_acceptor.hpp: bounded, and
// never stopped by running out of descriptors) and handed to gRPC.
//
// With TLS (front_access::tls, TCP only) every connection is served over TLS 1.2 or 1.3 with ALPN
// "h2": warm's relay does the handshake (within idle_timeout; mutual TLS with the material's client
// CA) and hands gRPC the plaintext (net/tls_relay.hpp); set_tls replaces the certificates for the
// connections that come next.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/front_access.hpp"
#include "warm/error.hpp"

namespace warm {
class runtime;
}

namespace warm::grpc_front {

// Where it listens and who may use it (net::front_access).
struct front_options : net::front_access {
  std::uint64_t max_request_bytes = 64ull << 20;       // a larger message gets RESOURCE_EXHAUSTED
  std::uint64_t max_tensor_bytes = 64ull << 20;        // per input tensor, as FP32 bytes
  std::uint32_t threads = 32;                          // calls served at once
  std::uint32_t queued_calls = 128;                    // calls waiting for a thread, at most
  std::uint32_t max_tensors = 256;                     // inputs, outputs, raw contents per request
  std::uint64_t max_message_entries = 16384;           // sub-messages and strings in one request
  std::chrono::milliseconds request_timeout{300'000};  // the longest wait, whatever the deadline
  // Connections: at most max_connections open at once (a new one past it is closed at once), and
  // one with no call in progress for idle_timeout is closed (gRPC's GOAWAY; its client reconnects
  // when it next calls), so connections that never present the token do not pile up.
  std::size_t max_connections = 1024;
  std::chrono::milliseconds idle_timeout{5000};
  std::function<void(const std::string&)> log;  // refused connections, failed accepts; may be empty
};

// The gRPC status code (grpc::StatusCode's value) for a warm error: INVALID_ARGUMENT, NOT_FOUND,
// RESOURCE_EXHAUSTED (no room, too large), UNAVAILABLE (load failure, unavailable),
// DEADLINE_EXCEEDED, INTERNAL.
int grpc_code(errc code) noexcept;

class front {
 public:
  // Binds host:port and starts serving before it returns. invalid_argument for a non-loopback
  // host without allow_remote, allow_remote without a token, or threads == 0; unavailable when
  // the address cannot be bound. `rt` is borrowed and must outlive the front.
  static expected<std::unique_ptr<front>> start(runtime& rt, front_options options);
  ~front();  // stop()s if needed

  // Stops accepting; calls being served finish (bounded by request_timeout).
  void stop();

  // The certificates, key and client CAs that connections accepted from now on are served with (a
  // reload: warmd's SIGHUP); connections already open keep theirs. Thread-safe. invalid_argument,
  // the front serving on as before, when `tls` does not load into OpenSSL, when it is null on a
  // front serving TLS, or non-null on a TCP front started without TLS. A front on a unix socket
  // serves no TLS: any `tls` is accepted and unused.
  expected<void> set_tls(std::shared_ptr<const net::tls_material> tls);

  // Accepted connections still open (gRPC closes them on its own; this looks again).
  std::size_t open_connections();

  std::uint16_t port() const;
  std::string address() const;  // "HOST:PORT" as bound

  struct impl;

 private:
  explicit front(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::grpc_front
