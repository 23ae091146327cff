// The Cap'n Proto servers of schemas/warm.capnp over a warm::runtime: `warm_server` (Warm) and
// `authenticator` (Authenticator, the bootstrap of a remote TCP listener).
//
// Threading: every object here lives on one kj event-loop thread (the RPC thread) and is created,
// called and destroyed there. Each method converts the request, calls the runtime's callback API,
// and waits on a kj cross-thread promise that the callback (called once, on a warm thread)
// fulfils; the results are filled back on the RPC thread. Watch events travel the same way
// through a mutex-protected queue; warm threads never block on the RPC thread.
//
// Errors are values: a client's mistake (unknown id, malformed tensor, over a limit) is answered
// with a Status, never with an exception or a dropped connection.
//
// Lifetime: the runtime must outlive every server object and every capability handed out (in
// practice: stop and join the RPC thread, then destroy the runtime).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "warm.capnp.h"
#include "warm/error.hpp"

namespace warm {
class runtime;
}

namespace warm::rpc {

// Limits on what one request may carry; over a limit is TOO_LARGE. Defaults in brackets.
struct server_options {
  std::uint64_t max_request_bytes = 64ull << 20;  // the whole request message [64 MiB]
  std::uint64_t max_tensor_bytes = 64ull << 20;   // one input tensor's data [64 MiB]
  std::uint32_t max_tensors = 64;                 // input tensors per inference [64]
  std::uint32_t page_size = 1000;                 // listModels with limit 0 [1000]
  std::uint32_t max_page_size = 10000;            // larger limits are clamped to this [10000]
  std::uint32_t max_queued_events = 65536;        // per watcher; older events are dropped (the
                                                  // gap shows in ModelEvent.sequence) [65536]
};

// Calls the server is answering now, across every warm_server sharing the counter: the RPC
// thread reads it to let in-flight calls finish at shutdown.
using in_flight_counter = std::shared_ptr<std::atomic<std::uint64_t>>;

class warm_server final : public Warm::Server {
 public:
  // `rt` is borrowed and must outlive this object and its WatchHandles. `in_flight` may be null.
  warm_server(warm::runtime& rt, server_options options, in_flight_counter in_flight = nullptr);

 protected:
  kj::Promise<void> registerModel(RegisterModelContext context) override;
  kj::Promise<void> unregisterModel(UnregisterModelContext context) override;
  kj::Promise<void> getModelStatus(GetModelStatusContext context) override;
  kj::Promise<void> ensureLoaded(EnsureLoadedContext context) override;
  kj::Promise<void> setVModel(SetVModelContext context) override;
  kj::Promise<void> deleteVModel(DeleteVModelContext context) override;
  kj::Promise<void> getVModelStatus(GetVModelStatusContext context) override;
  kj::Promise<void> listModels(ListModelsContext context) override;
  kj::Promise<void> infer(InferContext context) override;
  kj::Promise<void> inspect(InspectContext context) override;
  kj::Promise<void> watch(WatchContext context) override;

 private:
  struct guard;
  // Marks one call in flight until the returned guard is dropped (attach it to the promise).
  kj::Own<guard> track() const;
  // False, with `status` set to TOO_LARGE, when the request message exceeds max_request_bytes.
  bool fits(capnp::MessageSize size, Status::Builder status) const;

  warm::runtime& rt_;
  server_options options_;
  in_flight_counter in_flight_;
};

// The bootstrap of a TCP listener open to remote clients: hands out `warm` for the right token,
// compared in constant time (net/token.hpp).
class authenticator final : public Authenticator::Server {
 public:
  authenticator(std::string token, Warm::Client warm);

 protected:
  kj::Promise<void> authenticate(AuthenticateContext context) override;

 private:
  std::string token_;
  Warm::Client warm_;
};

}  // namespace warm::rpc
