// Devices: where model weights live and inference runs. A device has an exact byte budget and
// never over-commits it; every byte charged is returned when the memory holding it is freed.
//
// Backends: "host" (aligned host memory, OpenBLAS) and "cuda" (device memory, cuBLAS). Both share
// the budget, the load pipeline (src/gpu/upload_pipeline.hpp) and the model bookkeeping here.
//
// Threading: a device may be used from several threads at once. allocate(), load() and infer()
// are thread-safe; load() blocks on file I/O and must run on a loader thread, never on an actor
// scheduler thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "warm/dense_model.hpp"
#include "warm/error.hpp"
#include "warm/model_io.hpp"
#include "warm/model_repository.hpp"

namespace warm {

class device;
class upload_target;

// An exact byte budget. try_acquire() either takes all of the bytes or none; used() never
// exceeds capacity() unless set_capacity() lowered it below what was in use or force_acquire()
// took bytes past it. Lock-free and thread-safe.
class memory_budget {
 public:
  explicit memory_budget(std::uint64_t capacity) : capacity_(capacity) {}

  std::uint64_t capacity() const { return capacity_.load(std::memory_order_relaxed); }
  std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // capacity() - used(), or 0 while used() exceeds a lowered capacity.
  std::uint64_t free() const {
    auto c = capacity(), u = used();
    return u < c ? c - u : 0;
  }

  // Takes `bytes` if they fit; false (and nothing taken) otherwise.
  bool try_acquire(std::uint64_t bytes);
  // Takes `bytes` whether they fit or not: memory that is held already (a model runtime's
  // process holding more than its models are charged).
  void force_acquire(std::uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_acq_rel); }
  // Returns bytes taken earlier. Returning more than is used is a bug (asserts).
  void release(std::uint64_t bytes);
  // A new capacity (a model runtime that reported one). Bytes in use above a lowered capacity
  // stay charged; nothing more is taken until enough are released.
  void set_capacity(std::uint64_t capacity) {
    capacity_.store(capacity, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> capacity_;
  std::atomic<std::uint64_t> used_{0};
};

// Memory on a device, charged to its budget. Destroying it frees the memory and returns exactly
// size() bytes to the budget. Must not outlive the device that made it.
class device_buffer {
 public:
  virtual ~device_buffer() = default;
  std::uint64_t size() const { return size_; }
  // The backend's address of the memory (host pointer or CUDA device pointer).
  virtual void* address() const = 0;

 protected:
  explicit device_buffer(std::uint64_t size) : size_(size) {}

 private:
  std::uint64_t size_;
};

// Bytes charged to a device's budget but not yet allocated. The device actor reserves (cheap, on
// its own thread) and hands the reservation to a loader thread, which allocates (slow: fresh
// memory is zero-filled) and copies. Move-only; destroying an unused reservation returns its
// bytes. Must not outlive its device.
class memory_reservation {
 public:
  memory_reservation() = default;
  memory_reservation(memory_reservation&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  memory_reservation& operator=(memory_reservation&& other) noexcept;
  ~memory_reservation() { reset(); }

  std::uint64_t bytes() const { return bytes_; }
  const device* owner() const { return owner_; }
  explicit operator bool() const { return owner_ != nullptr; }
  // Returns the bytes now.
  void reset();
  // Keeps `bytes` (at most bytes()) and returns the rest now.
  void shrink_to(std::uint64_t bytes);
  // Takes over `other`'s bytes, which must be charged to the same device (asserts).
  void absorb(memory_reservation other);

 private:
  friend class device;
  memory_reservation(device* owner, std::uint64_t bytes) : owner_(owner), bytes_(bytes) {}
  device* owner_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// What a load measured: the bytes copied and how long reading and copying took.
struct load_stats {
  std::uint64_t bytes = 0;
  double seconds = 0;
  // When set by the caller, updated (relaxed) with the bytes copied so far while the load runs:
  // the live progress an operator watches ("ensure --sync" progress bars).
  std::atomic<std::uint64_t>* copied = nullptr;
  double gbps() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }
};

// A model resident on a device, as a backend loaded it (warm/backend.hpp). Destroying it unloads
// the model and returns its bytes to the device: never on a thread that runs actors (the
// reclaimer's job; a destruction there is counted, common/actor_threads.hpp). Immutable once
// loaded: concurrent inferences may share it.
class resident_model {
 public:
  virtual ~resident_model();
  resident_model(const resident_model&) = delete;
  resident_model& operator=(const resident_model&) = delete;

  const device& owner() const { return *owner_; }
  const model_io& io() const { return io_; }
  // The bytes it is charged on its device.
  virtual std::uint64_t bytes() const = 0;
  // The largest batch one inference may take (batched models).
  virtual std::uint64_t max_batch() const { return UINT64_MAX; }
  // About how many multiply-adds an inference of `batch` rows costs (saturating): small ones run
  // on the caller's thread (runtime_options::inline_inference_limit).
  virtual std::uint64_t cost(std::uint64_t batch) const = 0;
  // Runs inputs that check_inputs(io()) accepted, in io().inputs order with `batch` rows, and
  // returns the outputs in io().outputs order. Thread-safe.
  virtual expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                            std::uint64_t batch) const = 0;
  // run() that may answer later, on another thread: `done` is called exactly once, possibly
  // before this returns. By default it is run() on the calling thread. A model whose inference
  // happens in another process (a model runtime) sends it and returns, so no thread of warm's
  // waits for the answer. Thread-safe; `done` must not block.
  using run_done = std::function<void(expected<std::vector<tensor>>)>;
  virtual void run_then(const std::vector<tensor>& inputs, std::uint64_t batch,
                        run_done done) const {
    done(run(inputs, batch));
  }
  // The model's name in the process that holds it (a model runtime's id for this load); empty
  // for a model held in this process. device_event::in_flight names models by it.
  virtual std::string host_id() const { return {}; }

  // What the load measured the model takes on its device, for backends that measure it
  // (TorchScript: the peak of libtorch's allocations while loading and warming up); 0 for those
  // whose charge is exact by construction (dense: its weights buffer is the model).
  std::uint64_t measured_bytes() const { return measured_; }
  // Bytes the model needs beyond its charge: measured_bytes() - bytes() when that is positive.
  std::uint64_t shortfall() const { return measured_ > bytes() ? measured_ - bytes() : 0; }
  // Settles the charge on the measurement, after which bytes() == measured_bytes(): gives back
  // what exceeds it, or absorbs `more`, which must hold exactly shortfall() bytes of the same
  // device (asserts). Not thread-safe: call it before the model is shared.
  virtual void settle(memory_reservation more);

 protected:
  resident_model(const device& owner, model_io io) : owner_(&owner), io_(std::move(io)) {}
  void set_measured_bytes(std::uint64_t bytes) { measured_ = bytes; }

 private:
  const device* owner_;
  model_io io_;
  std::uint64_t measured_ = 0;
};

// A dense model resident on a device: its weights buffer and layout.
class dense_resident final : public resident_model {
 public:
  dense_resident(device& owner, dense_spec spec, std::unique_ptr<device_buffer> weights);

  const dense_spec& spec() const { return spec_; }
  const device_buffer& weights() const { return *weights_; }
  std::uint64_t bytes() const override { return weights_->size(); }
  std::uint64_t max_batch() const override;
  std::uint64_t cost(std::uint64_t batch) const override;
  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                    std::uint64_t batch) const override;

 private:
  device* device_;
  dense_spec spec_;
  std::unique_ptr<device_buffer> weights_;
};

// The inputs and outputs of a dense model: "input" F32 [-1, in] and "output" F32 [-1, out].
model_io dense_io(const dense_spec& spec);

// Something a device reports on its own. Only devices whose models live in another process (model
// runtimes, src/remote) report anything: the process died and took every model with it, or its
// capacity changed (capacity() is already the new one) or the memory it charges outside its
// models did (device::overcharge); either way its models must fit into capacity() again.
struct device_event {
  enum class kind { models_lost, capacity_changed, ready };
  kind what = kind::capacity_changed;
  warm::error reason;  // models_lost: why (names the device and the process's end)
  // models_lost: how long until the device may take models again (its restart is due); the
  // lost models' failure records on it expire then.
  std::chrono::nanoseconds back_in{};
  // models_lost: the models whose inferences were running when the process died, by their
  // resident_model::host_id() (once per inference), the suspects of a crash.
  std::vector<std::string> in_flight;
};

// A device that loads and runs models itself, in place of warm's backends (a model runtime in
// another process). The loader pool's loads of models on such a device go here.
class model_host {
 public:
  virtual ~model_host() = default;
  // Whether it serves models of `kind` ("dense", "torchscript", ...).
  virtual bool serves(std::string_view kind) const = 0;
  // As backend::load: loads the model charged `reservation`; may block (a loader thread); on
  // failure every byte goes back.
  virtual expected<std::unique_ptr<resident_model>> load_model(const model_location& where,
                                                               memory_reservation reservation,
                                                               load_stats* stats) = 0;
  // Whether `model`, which load_model() made, is still held (false once the process that loaded
  // it died, even if a new one runs now).
  virtual bool holds(const resident_model& model) const = 0;
};

// Largest number of activation elements (batch x widest layer) one inference may need.
inline constexpr std::uint64_t max_activation_elements = std::uint64_t{1} << 27;

class device {
 public:
  virtual ~device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  // "host", "cuda:0": how users name it in device specs.
  const std::string& name() const { return name_; }
  // Whether models on it live in host memory and run on the host's CPUs (backends that run only
  // there, such as TorchScript, are placed on these devices alone).
  virtual bool host() const { return false; }
  std::uint64_t capacity() const { return budget_.capacity(); }
  std::uint64_t used() const { return budget_.used(); }
  // capacity() - used(), or 0 while used() exceeds a lowered capacity.
  std::uint64_t free() const { return budget_.free(); }

  // Whether models may be placed here now (a model runtime that is restarting is not ready).
  virtual bool ready() const { return true; }
  // One line on the device's own state for operators, empty when there is nothing to say
  // ("runtime pid 4242, restarts 1").
  virtual std::string state() const { return {}; }
  // The device's own loader when it loads and runs models itself; nullptr for warm's devices,
  // whose models the backends load.
  virtual model_host* hosted_models() { return nullptr; }
  // Sets the one listener for device_events (nullptr: none), called from any thread; it must not
  // block. Devices that report nothing ignore it.
  virtual void watch(std::function<void(const device_event&)> listener) { (void)listener; }

  // Charges `bytes` to the budget and allocates them. model_too_large when bytes exceed the
  // capacity (it can never fit), capacity_exhausted when they do not fit now; on failure the
  // budget is unchanged. A backend allocation failure (e.g. cudaMalloc) returns the bytes.
  expected<std::unique_ptr<device_buffer>> allocate(std::uint64_t bytes);

  // allocate() in two steps. reserve() charges the budget only (fails like allocate()); the
  // second allocates the reserved bytes, consuming the reservation (which must be this
  // device's), and returns them to the budget if the backend's allocation fails.
  expected<memory_reservation> reserve(std::uint64_t bytes);
  expected<std::unique_ptr<device_buffer>> allocate(memory_reservation reservation);

  // Loads a validated model: allocates its data buffer and copies the file's bytes into it with
  // large sequential reads, once. Fails like allocate(), or load_failed when the file cannot be
  // read or changed since it was validated. Blocks on I/O: call it from a loader thread.
  expected<std::unique_ptr<dense_resident>> load(const model_file& file,
                                                 load_stats* stats = nullptr);

  // load() with the bytes reserved beforehand (by the device actor, before the load started):
  // allocates the whole reservation and copies the file into its start; the stats time both.
  // A reservation may exceed the model's data bytes (a registration's size hint: headroom the
  // model is charged for while resident). load_failed when it is smaller (the file grew since
  // it was registered); the bytes go back on any failure.
  expected<std::unique_ptr<dense_resident>> load_into(const model_file& file,
                                                      memory_reservation reservation,
                                                      load_stats* stats = nullptr);

  // Runs `model` (which must be resident on this device) on a batch. `input` holds
  // batch x input_width floats, row-major; `output` is resized to batch x output_width.
  // invalid_argument for a wrong input size, a zero or oversized batch or a foreign model.
  expected<void> infer(const dense_resident& model, const float* input, std::uint64_t input_count,
                       std::uint64_t batch, std::vector<float>& output);

 protected:
  device(std::string name, std::uint64_t capacity) : name_(std::move(name)), budget_(capacity) {}

  // Allocates `bytes` of backend memory; the budget is already charged.
  virtual expected<std::unique_ptr<device_buffer>> allocate_memory(std::uint64_t bytes) = 0;
  // The staging scheme that moves file bytes into `destination`.
  virtual std::unique_ptr<upload_target> upload_target_for(device_buffer& destination) = 0;
  // Runs a validated request: input size, batch and ownership are already checked.
  virtual expected<void> run(const dense_resident& model, const float* input, std::uint64_t batch,
                             float* output) = 0;

  // Backends give bytes back from their buffers' destructors.
  void release(std::uint64_t bytes) { budget_.release(bytes); }
  void set_capacity(std::uint64_t bytes) { budget_.set_capacity(bytes); }
  // Charges `bytes` even past the capacity, as a reservation: memory the device holds outside
  // its models (a model runtime's process). A device that does so reports capacity_changed,
  // on which its actor evicts down to the capacity.
  memory_reservation overcharge(std::uint64_t bytes) {
    budget_.force_acquire(bytes);
    return memory_reservation(this, bytes);
  }

 private:
  friend class memory_reservation;

 private:
  std::string name_;
  memory_budget budget_;
};

// A device as users write it: "host:4GiB", "host.1:2GiB" (a second, separately budgeted host
// device), "cuda:0:70GiB", "cuda:1" (capacity defaults: host 1 GiB; cuda 90% of the GPU's free
// memory at start).
struct device_spec {
  enum class kind { host, cuda };
  kind type = kind::host;
  int ordinal = 0;                        // GPU index for cuda
  std::optional<std::uint64_t> capacity;  // bytes; nullopt = the default
  int partition = -1;                     // host.N: N; -1 for plain "host"
  std::string to_string() const;
};

// Parses a spec; invalid_argument with the reason for anything malformed.
expected<device_spec> parse_device_spec(const std::string& text);

// Creates a device. unavailable when the spec names a CUDA device and there is none (the message
// carries the driver's reason) or CUDA support was not built.
expected<std::unique_ptr<device>> make_device(const device_spec& spec);

// How many threads the host backend's BLAS may use for one call. Process-wide (OpenBLAS keeps a
// single setting). warm runs many requests in parallel, so one thread per call (the runtime's
// default) avoids BLAS threads fighting request threads for the cores; large batches on an idle
// machine gain from more.
void set_host_blas_threads(int threads);

// How many CUDA devices are usable, or unavailable with the reason. Never crashes without a GPU.
expected<int> cuda_device_count();

}  // namespace warm
