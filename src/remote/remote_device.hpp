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
// Threading: load_model() and the resident models' run() and destructor block their calling
// thread until the runtime answers or a timeout passes (loader, inference and reclaimer threads;
// never an actor's). A resident model belongs to one connection: after a restart, its run()
// fails with unavailable and its destructor only returns its bytes.
#pragma once

#include <chrono>
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
  std::chrono::milliseconds start_timeout{15000};  // start() waits up to this for the first ready status
  std::chrono::milliseconds load_timeout{120000};  // a load not answered by then fails with timeout
  std::chrono::milliseconds infer_timeout{60000};  // an inference not answered by then fails with timeout
  std::chrono::milliseconds call_timeout{5000};    // status, predictSize and unload; a status past it
                                                   // counts as a hung runtime
  std::chrono::milliseconds status_period{2000};   // how often status is asked when idle
  std::chrono::milliseconds restart_min{100};      // back-off before a restart: doubles from this
  std::chrono::milliseconds restart_max{10000};    // up to this; back to the start after a minute up
  // Told (from the link's thread) when the runtime is lost, and when it is ready again.
  std::function<void(const std::string&)> log;
};

// "NAME=COMMAND" or "NAME=unix:PATH" (warmd --runtime). NAME: 1..64 of [A-Za-z0-9_.-], not "host"
// or "cuda" (device names users already use).
expected<runtime_link_options> parse_runtime_spec(const std::string& text);

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
  expected<std::unique_ptr<resident_model>> load_model(const model_location& where, memory_reservation reservation,
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
  expected<void> run(const dense_resident& model, const float* input, std::uint64_t batch, float* output) override;

 private:
  explicit remote_device(runtime_link_options options);
  friend class link;
  friend class remote_resident;
  std::unique_ptr<link> link_;
};

}  // namespace warm
