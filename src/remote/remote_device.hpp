// A model runtime as one of warm's devices: a process that serves schemas/runtime.capnp loads and
// runs the models, and warm sees a device with the runtime's capacity whose models load, evict
// and fail like any other's (docs/runtimes.md).
//
// The device owns a link: one thread with a kj event loop that starts the runtime process (or
// connects to a runtime's Unix socket), asks its status, and watches the connection. When the
// process dies or hangs, the link reports models_lost (every model it held is gone), kills what
// is left of it, and starts it again after a back-off that doubles on each failure in a row. When
// the runtime reports another capacity, the device adopts it (capacity_changed).
//
// The runtime is not trusted (it runs models' code): its numbers are bounded (runtime_limits), a
// measured size past its capacity fails the load, and an inference's outputs that break the
// load's declaration (check_outputs) fail it with internal. What its process holds beyond its
// models' charges (status.rssBytes) is charged to the device, so warm evicts down to the capacity.
//
// Threading: load_model() and the resident models' run() and destructor block their calling
// thread until the runtime answers or a timeout passes (loader, inference and reclaimer threads;
// never an actor's). A resident model belongs to one connection: after a restart, its run()
// fails with unavailable and its destructor only returns its bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "warm/device.hpp"

namespace warm {

// How warmd reaches one model runtime.
struct runtime_link_options {
  std::string name;     // the device's name
  std::string command;  // a shell command started and supervised (WARM_RUNTIME_FD=3), or
  std::string socket;   // the Unix socket of a runtime someone else runs
  // The repository roots a started runtime may load from, passed in WARM_RUNTIME_REPOS
  // (colon-separated): warm-runtime confines itself to them.
  std::vector<std::string> repositories;
  std::chrono::milliseconds start_timeout{
      15000};  // start() waits up to this for the first ready status
  std::chrono::milliseconds load_timeout{120000};  // a load not answered by then fails with timeout
  std::chrono::milliseconds infer_timeout{
      60000};  // an inference not answered by then fails with timeout
  std::chrono::milliseconds call_timeout{5000};  // status, predictSize and unload; a status past it
                                                 // counts as a hung runtime
  std::chrono::milliseconds status_period{2000};  // how often status is asked when idle
  std::chrono::milliseconds restart_min{100};     // back-off before a restart: doubles from this
  std::chrono::milliseconds restart_max{10000};   // up to this; back to the start after a minute up
  // Memory the runtime's process may hold beyond its models' charges and its memory at start
  // (status.rssBytes - status.baseRssBytes) before warmd charges the rest to the device: room for
  // the allocators' and libraries' own.
  std::uint64_t rss_slack = std::uint64_t{64} << 20;
  // Told (from the link's thread) when the runtime is lost, when it is ready again, when its
  // memory beyond its models starts or stops being charged, and of a status it refuses in part.
  std::function<void(const std::string&)> log;
};

// The most warmd takes from a runtime. A runtime runs untrusted model code, so every number and
// list it answers is bounded before warmd uses it (docs/runtimes.md, "Trust").
namespace runtime_limits {
inline constexpr std::uint64_t bytes = std::uint64_t{1}
                                       << 50;         // capacity and RSS: clamped to 1 PiB
inline constexpr std::uint32_t loading_threads = 64;  // status.loadingThreads: clamped to 1..64
inline constexpr std::size_t loaded_ids =
    65536;  // a longer status.loaded is refused: none unloaded
inline constexpr std::size_t unloads_at_once =
    16;                                       // the ids listed are unloaded this many at a time
inline constexpr std::size_t kinds = 64;      // status.kinds: the first 64 are read
inline constexpr std::size_t text = 256;      // version and each kind: cut to 256 bytes
inline constexpr std::size_t tensors = 1024;  // a load describing more inputs or outputs fails
}  // namespace runtime_limits

// "NAME=COMMAND" or "NAME=unix:PATH" (warmd --runtime). NAME: 1..64 of [A-Za-z0-9_.-], not "host"
// or "cuda" (device names users already use).
//
// A runtime that serves ModelMesh's model-runtime interface over gRPC (schemas/model_runtime.proto)
// is "NAME=grpc:ADDR" (one someone else runs, at a gRPC target such as unix:PATH or host:port) or
// "NAME=grpc-exec:COMMAND" (one started and supervised). Either runs `BRIDGE --connect ADDR` or
// `BRIDGE --exec COMMAND` as the supervised command: warm-mmesh, which serves runtime.capnp to
// warmd and speaks gRPC to the runtime. invalid_argument for those forms when `bridge` is empty.
expected<runtime_link_options> parse_runtime_spec(const std::string& text,
                                                  const std::string& bridge = {});

// `text` quoted for /bin/sh: in single quotes, each ' written as '\''.
std::string shell_quote(const std::string& text);

class remote_device final : public device, public model_host {
 public:
  // Starts the link and waits up to options.start_timeout for the runtime's first ready status
  // (its capacity). A runtime that is not ready by then is not an error: the device starts with
  // capacity 0, not ready, and the link keeps trying.
  static std::shared_ptr<remote_device> start(runtime_link_options options);
  // Stops the link: closes the connection and kills the process it supervises.
  ~remote_device() override;

  bool ready() const override;
  std::string state() const override;
  model_host* hosted_models() override { return this; }
  void watch(std::function<void(const device_event&)> listener) override;

  bool serves(std::string_view kind) const override;
  expected<std::unique_ptr<resident_model>> load_model(const model_location& where,
                                                       memory_reservation reservation,
                                                       load_stats* stats) override;
  bool holds(const resident_model& model) const override;

  // The supervised process's pid (0 when none runs, or for a socket runtime), and how many times
  // the runtime was lost since start.
  int pid() const;
  std::uint64_t restarts() const;

  class link;

 protected:
  // Models live in the runtime: nothing is allocated or run here through the dense path.
  expected<std::unique_ptr<device_buffer>> allocate_memory(std::uint64_t bytes) override;
  std::unique_ptr<upload_target> upload_target_for(device_buffer& destination) override;
  expected<void> run(const dense_resident& model, const float* input, std::uint64_t batch,
                     float* output) override;

 private:
  explicit remote_device(runtime_link_options options);
  friend class link;
  friend class remote_resident;
  std::unique_ptr<link> link_;
};

}  // namespace warm
