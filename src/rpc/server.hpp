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
#include <functional>
#include <memory>
#include <string>

#include "warm.capnp.h"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}
namespace warm::rpc {

// A Warm.infer call as its server sees it.
using infer_context = capnp::CallContext<Warm::InferParams, Warm::InferResults>;

// Limits on what one request may carry; over a limit is TOO_LARGE. Defaults in brackets.
struct server_options {
  std::uint64_t max_request_bytes = 64ull << 20;  // the whole request message [64 MiB]
  std::uint64_t max_tensor_bytes = 64ull << 20;   // one input tensor's data [64 MiB]
  std::uint32_t max_tensors = 64;                 // input tensors per inference [64]
  std::uint32_t page_size = 1000;                 // listModels with limit 0 [1000]
  std::uint32_t max_page_size = 10000;            // larger limits are clamped to this [10000]
  std::uint32_t max_queued_events =
      4096;  // per watcher; older events are dropped and the
             // next one delivered says how many (ModelEvent.missed) [4096]
  std::uint32_t max_watchers_per_connection =
      16;                            // watch calls past it answer capacityExhausted [16]
  std::uint32_t max_watchers = 256;  // across every connection of the server [256]
  // Re-reads the host's served-models configuration and applies it (Warm.reload), answering the
  // number of served models; called on the RPC thread, it must not block. Empty: reload answers
  // unavailable.
  std::function<void(callback<std::uint32_t>)> reload;
  // This instance's view of its cluster (Warm.clusterInfo); called on the RPC thread, it must not
  // block. Empty: the server runs alone (enabled false).
  std::function<void(callback<warm::cluster_info>)> cluster;
  // Serves inferences elsewhere: warmd's cluster mode relays a request for a model that a peer
  // holds straight from the RPC thread. Called there for each Warm.infer that passed the size
  // checks, before the runtime sees it. A promise when it takes the call: it fills the results,
  // and calls `serve_here` (the runtime serving it, marked forwarded) when the peer cannot.
  // kj::none: the runtime serves it. Empty: every inference goes to the runtime.
  std::function<kj::Maybe<kj::Promise<void>>(infer_context context,
                                             std::function<kj::Promise<void>()> serve_here)>
      relay;
};

// Watchers open now: one count per connection and one shared by every connection. Lives on the
// RPC thread only (created, changed and read there), like the objects that hold it.
struct watch_counts {
  std::uint32_t connection = 0;
  std::shared_ptr<std::uint32_t> total = std::make_shared<std::uint32_t>(0);
};

// Calls the server is answering now, across every warm_server sharing the counter: the RPC
// thread reads it to let in-flight calls finish at shutdown.
using in_flight_counter = std::shared_ptr<std::atomic<std::uint64_t>>;

class warm_server final : public Warm::Server {
 public:
  // `rt` is borrowed and must outlive this object and its WatchHandles. `in_flight` may be null.
  // `all_watchers` is the count shared with the other connections' servers (null: this server's
  // own); one warm_server serves one connection, so the per-connection watcher limit is its own.
  warm_server(warm::runtime& rt, server_options options, in_flight_counter in_flight = nullptr,
              std::shared_ptr<std::uint32_t> all_watchers = nullptr);

 protected:
  kj::Promise<void> registerModel(RegisterModelContext context) override;
  kj::Promise<void> unregisterModel(UnregisterModelContext context) override;
  kj::Promise<void> getModelStatus(GetModelStatusContext context) override;
  kj::Promise<void> ensureLoaded(EnsureLoadedContext context) override;
  kj::Promise<void> setVModel(SetVModelContext context) override;
  kj::Promise<void> deleteVModel(DeleteVModelContext context) override;
  kj::Promise<void> retry(RetryContext context) override;
  kj::Promise<void> servedModels(ServedModelsContext context) override;
  kj::Promise<void> clusterInfo(ClusterInfoContext context) override;
  kj::Promise<void> reload(ReloadContext context) override;
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
  std::shared_ptr<watch_counts> watchers_;  // shared with this server's WatchHandles
};

}  // namespace warm::rpc
