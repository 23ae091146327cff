// warm-runtime's ModelRuntime server (schemas/runtime.capnp): warm's own backends (dense,
// TorchScript) on one host device of the runtime's capacity. Loads, size predictions and
// inferences run on worker threads, so the event loop keeps answering status while a model loads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "call_watch.hpp"
#include "runtime.capnp.h"

namespace warm {

struct runtime_server_options {
  std::uint64_t capacity = std::uint64_t{1} << 30;  // bytes models may take
  unsigned threads = 0;                             // inference threads; 0 = one per core
  unsigned loading_threads = 1;                     // loads at once (reported in status)
  // When set, a file holding the capacity to report ("512MiB"), read at every status: whoever
  // runs the runtime (an orchestrator) may resize it while it runs. The device keeps `capacity`
  // as its ceiling; warmd places models within the reported capacity and evicts down to it.
  std::string capacity_file;
  // The canonical repository roots whose models it loads; a load or size prediction of a file
  // whose root is not one of them (or has no root) is refused.
  std::vector<std::string> repositories;
  // An open /proc/self/statm, read for status.rssBytes (the server owns it from now on); -1: the
  // process's memory is not measured (rssBytes 0). Opened before the sandbox hides /proc.
  int statm_fd = -1;
  std::chrono::milliseconds rss_period{50};  // how often the process's memory is sampled
  // Bounds on each load and inference (call_watch.hpp), and what is done with a call past them
  // (warm-runtime ends the process); null: calls are not watched.
  call_limits limits;
  call_watch::runaway_fn on_runaway;
};

// The capability to serve; one object may serve several connections (they share its models).
kj::Own<remote::ModelRuntime::Server> make_runtime_server(const runtime_server_options& options);

}  // namespace warm
