// Inferences forwarded to other instances of the cluster (docs/cluster.md): one thread with a kj
// event loop, and one Cap'n Proto connection per peer address, opened at its first forward and
// again after it breaks.
//
// Contract:
//  - infer() marks the request forwarded (the peer serves it and never passes it on) and returns
//    at once; `done` gets the peer's answer on this client's thread. A peer that cannot be
//    reached, breaks the connection or does not answer within options::call_timeout does not
//    fail the request: it goes to `fallback` (warmd's own runtime serves it).
//  - Peers reached over TCP with remote access need the cluster's token (options::token: the
//    token every instance's listener takes, from --token-file).
//  - Thread-safe; the destructor fails the forwards in flight with unavailable and joins the
//    thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "warm/runtime_types.hpp"

namespace warm::cluster {

class peer_tls;

// What the cluster's drivers ask of other instances (peer_client in warmd, fakes in tests).
// Thread-safe; every call returns at once and answers once.
class peer_calls {
 public:
  virtual ~peer_calls() = default;
  // Forwards `request` to the instance at `address` ("unix:PATH" or "HOST:PORT").
  virtual void infer(const std::string& address, infer_request request,
                     callback<infer_result> done) = 0;
  // Asks the instance at `address` to load `model` and answers once it is loaded there.
  virtual void ensure(const std::string& address, const std::string& model,
                      callback<void> done) = 0;
};

class peer_client final : public peer_calls {
 public:
  struct options {
    std::string token;  // empty: peers are reached without a token (Unix sockets, loopback)
    std::shared_ptr<const peer_tls> tls;  // null: peers are reached without TLS (peer_tls.hpp)
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds call_timeout{60000};
    // Serves a request that could not be forwarded (marked forwarded: it is not passed on again).
    std::function<void(infer_request, callback<infer_result>)> fallback;
    // Told of each peer that could not be reached (rate-limited by the caller if needed).
    std::function<void(const std::string&)> log;
  };

  // Starts the thread. invalid_argument without a fallback.
  static expected<std::unique_ptr<peer_client>> start(options o);
  ~peer_client();
  peer_client(const peer_client&) = delete;
  peer_client& operator=(const peer_client&) = delete;

  // Forwards `request` to the instance at `address` ("unix:PATH" or "HOST:PORT").
  void infer(const std::string& address, infer_request request,
             callback<infer_result> done) override;

  // Asks the instance at `address` to load `model` (Warm.ensureLoaded, sync) and answers once it
  // is loaded there, on this client's thread: the peer's error, or unavailable when the peer
  // cannot be reached or does not answer within call_timeout. Nothing falls back.
  void ensure(const std::string& address, const std::string& model, callback<void> done) override;

  // Forwards to `address` not answered yet: forwarding spreads a model's requests over its copies
  // by it (the copy with the fewest of this instance's requests in flight).
  std::uint32_t in_flight(const std::string& address) const;

  // Forwards answered by a peer, and forwards that fell back.
  std::uint64_t forwarded() const;
  std::uint64_t fell_back() const;

  struct impl;

 private:
  explicit peer_client(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::cluster
