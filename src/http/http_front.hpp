// warm's HTTP front: the KServe V2 inference protocol, Triton's model-repository extension and
// Prometheus metrics, over a warm::runtime. Served by cpp-httplib on its own threads (never CAF's):
//
//   GET  /v2/health/live            200 while the process serves HTTP
//   GET  /v2/health/ready           200 once the runtime answers (registry loaded, devices up)
//   GET  /v2                        server metadata
//   GET  /v2/models/{m}             model metadata (inputs, outputs) from the file header; no load
//   GET  /v2/models/{m}/ready       200 when LOADED, 400 otherwise; never triggers a load
//   POST /v2/models/{m}/infer       V2 JSON tensors; loads the model on demand and waits
//   POST /v2/repository/index       models with state and reason ({"ready": true} filters)
//   POST /v2/repository/models/{m}/load | unload
//   GET  /metrics                   Prometheus text (docs/metrics.md)
//   GET  /, /console                the console (docs/console.md): page, feed, models, actions
//
// {m} is a model id or a vmodel id. Errors are {"error": "..."} with the status http_status()
// gives: 400 bad input, 404 unknown model or route, 503 load failure, never 500 for a client's
// mistake. A client holds no worker thread until its request head (and a Content-Length body
// within its route's limit) has arrived, within bounds of size and time (front_options), so slow
// or endless headers and bodies cannot starve the others; health checks and /metrics have threads
// of their own. With a token, every endpoint but /v2/health/* needs "Authorization: Bearer TOKEN".
// With TLS (front_access::tls, TCP only), every connection is served over TLS, its handshake done
// by the connection gate within the first head's deadline (conn_gate.hpp); set_tls replaces the
// certificates for the connections that come next.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/v2_codec.hpp"
#include "net/front_access.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}

namespace warm::http {

// Where it listens and who may use it (net::front_access). While an address's budget of wrong
// tokens is spent, its requests are answered 429 with Retry-After.
struct front_options : net::front_access {
  std::uint64_t max_request_bytes = 64ull << 20;  // larger bodies get 413
  decode_limits limits;
  // Memory all inference bodies being decoded may take at once (decode_budget.hpp); a body that
  // finds no room within decode_wait gets 503.
  std::uint64_t max_decoding_bytes = 1ull << 30;
  std::chrono::milliseconds decode_wait{10000};
  std::uint32_t threads = 32;  // requests served at once; a miss holds one while its model loads
  std::chrono::milliseconds request_timeout{300'000};  // an infer or load waiting longer gets 504
  // Before a worker is taken (conn_gate.hpp): a request head over max_header_bytes or
  // max_header_lines gets 431; one not complete within header_timeout (the first on a connection:
  // within the shorter first_header_timeout) gets 408; a connection that sends nothing within
  // idle_timeout is closed; a body not complete within body_timeout (from the head), or arriving
  // slower than min_body_rate bytes a second after its first 2 s, gets 408. A body with a
  // Content-Length within the route's limit is read by the gate, at most max_buffered_body_bytes
  // of them at once (0: none), before a worker serves it. More than max_connections open at once,
  // or max_connections_per_address from one address (0: no bound): the newest gets 503.
  // /v2/health/* and /metrics have two threads of their own beside `threads`.
  std::size_t max_header_bytes = 32 << 10;
  std::size_t max_header_lines = 100;
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds first_header_timeout{5000};
  std::chrono::milliseconds body_timeout{60000};
  std::uint64_t min_body_rate = 16 << 10;
  std::uint64_t max_buffered_body_bytes = 256ull << 20;
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_address = 64;
  // Told of refused connections (a line each, without a trailing newline); any thread; may be
  // empty.
  std::function<void(const std::string&)> log;
  bool per_model_metrics = false;  // warm_model_*{model="…"} series on /metrics
  // More families for /metrics, in Prometheus text (each line ending in a newline), appended to
  // the runtime's: warmd's cluster counters. Called on an HTTP thread; may be empty.
  std::function<std::string()> extra_metrics;
  // The console (docs/console.md): served at / and /console, with its feed and actions.
  bool console = true;
  // This instance's view of its cluster, for the console (warmd's cluster mode); empty when it
  // runs alone. Called on an HTTP thread; must answer without blocking.
  std::function<void(callback<cluster_info>)> cluster;
};

class front {
 public:
  // Binds host:port and starts serving before it returns. invalid_argument for a non-loopback
  // host without allow_remote, allow_remote without a token, threads == 0, or TLS material that
  // OpenSSL does not take (net/tls_server.hpp); unavailable when the address cannot be bound. `rt`
  // is borrowed and must outlive the front. options.tls is ignored on a unix socket.
  static expected<std::unique_ptr<front>> start(runtime& rt, front_options options);
  ~front();  // stop()s if needed

  // Stops accepting; requests being served finish (bounded by request_timeout); joins threads.
  void stop();

  // The certificates, key and client CAs that connections accepted from now on are served with
  // (a reload: warmd's SIGHUP); connections already open keep theirs to their end. Thread-safe;
  // the context is built (a few milliseconds) before it replaces the old one. invalid_argument,
  // the front serving on as before, when `tls` does not load into OpenSSL, when it is null on a
  // front serving TLS (a reload does not turn TLS off), or non-null on a TCP front started
  // without TLS (nor on). A front on a unix socket serves no TLS: any `tls` is accepted and unused.
  expected<void> set_tls(std::shared_ptr<const net::tls_material> tls);

  std::uint16_t port() const;
  std::string address() const;  // "HOST:PORT" as bound

  struct impl;

 private:
  explicit front(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::http
