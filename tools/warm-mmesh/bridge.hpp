// warm-mmesh's ModelRuntime server (schemas/runtime.capnp): every call of warm's runtime
// interface translated to a ModelMesh model runtime's gRPC SPI (schemas/model_runtime.proto) and
// KServe V2 inference (schemas/kserve_v2.proto) on one channel.
//
// Threads: the server lives on its kj event loop and all of its state is touched there only.
// gRPC calls run on gRPC's threads (grpc_call.hpp) and come back to the loop, so status is
// answered while loads and inferences run, and loads and inferences run concurrently.
#pragma once

#include <grpcpp/channel.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime.capnp.h"

namespace warm::mmesh {

struct bridge_options {
  // The kinds reported in status; "*" is every kind no built-in backend serves (warmd reads it).
  std::vector<std::string> kinds{"*"};
  // Prefixed to the runtime's runtimeVersion in status.version.
  std::string version_prefix = "mmesh: ";
  // The runtime process's resident bytes now, for status.rssBytes (and baseRssBytes, taken at its
  // first READY); null: not measured (both 0), as for a runtime the bridge did not start.
  std::function<std::uint64_t()> rss;
  // A runtime that was unreachable (a status failed with UNAVAILABLE) and answers again may have
  // restarted and lost its models: end the bridge then (for one it did not start; a child it
  // started cannot restart unseen). A runtime that answers STARTING after READY always ends it.
  bool end_on_reconnect = false;
  // Deadlines of the calls that have none from the runtime.
  std::chrono::milliseconds status_deadline{2000};
  std::chrono::milliseconds predict_deadline{4000};
  std::chrono::milliseconds metadata_deadline{30000};
  std::chrono::milliseconds unload_deadline{30000};
};

// The capability warmd talks to. `channel` is the runtime's (one for every call). Call on the
// thread that runs the kj event loop serving it.
kj::Own<remote::ModelRuntime::Server> make_bridge(std::shared_ptr<grpc::Channel> channel,
                                                  bridge_options options);

}  // namespace warm::mmesh
