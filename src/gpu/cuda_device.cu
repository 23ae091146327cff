// The CUDA backend of warm::device (contract in cuda_device.hpp and warm/device.hpp).
//
// Resources are RAII (unique_ptr with CUDA deleters) and every CUDA runtime or cuBLAS call is
// checked by WARM_CUDA_CHECK, which turns a failure into a warm::error: unavailable while the
// device is created, load_failed while uploading, internal while running (capacity_exhausted
// for an out-of-memory cudaMalloc anywhere, since freeing memory may help).
#include "gpu/cuda_device.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/upload_pipeline.hpp"
#include "warm/units.hpp"

namespace warm {
namespace {

// Both status enums use 0 for success (cudaSuccess, CUBLAS_STATUS_SUCCESS).
template <class Status>
bool ok(Status status) {
  return status == Status{};
}
const char* describe(cudaError_t status) {
  return cudaGetErrorString(status);
}
const char* describe(cublasStatus_t status) {
  return cublasGetStatusString(status);
}

// The error for a failed call: "<call> failed: <reason>". Clears the thread's last CUDA error so
// that a later cudaGetLastError() (the kernel launch check) reports only its own failure.
template <class Status>
error cuda_failure(errc code, const char* call, Status status) {
  (void)cudaGetLastError();
  return make_error(code, std::string(call) + " failed: " + describe(status));
}

// Runs `call` (a CUDA runtime or cuBLAS call); on failure returns its error, with `code`, from
// the enclosing function (which returns some expected<T>).
#define WARM_CUDA_CHECK(code, call)                  \
  do {                                               \
    if (const auto status_ = (call); !ok(status_)) { \
      return cuda_failure((code), #call, status_);   \
    }                                                \
  } while (false)

// Owners of CUDA resources. Deleters ignore errors: they run in destructors, and a failure there
// (a lost device) leaves nothing to recover.
template <auto destroy>
struct cuda_deleter {
  template <class T>
  void operator()(T* resource) const {
    (void)destroy(resource);
  }
};
using stream_ptr =
    std::unique_ptr<std::remove_pointer_t<cudaStream_t>, cuda_deleter<cudaStreamDestroy>>;
using event_ptr =
    std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, cuda_deleter<cudaEventDestroy>>;
using blas_ptr =
    std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, cuda_deleter<cublasDestroy>>;
using device_ptr = std::unique_ptr<void, cuda_deleter<cudaFree>>;
using pinned_ptr = std::unique_ptr<void, cuda_deleter<cudaFreeHost>>;

// Factories for those owners, on the calling thread's current device.
expected<stream_ptr> new_stream(errc code) {
  cudaStream_t stream = nullptr;
  WARM_CUDA_CHECK(code, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream_ptr(stream);
}

// Device memory; capacity_exhausted when the GPU is out of memory, `code` for other failures.
expected<device_ptr> new_device_memory(std::uint64_t bytes, errc code) {
  void* memory = nullptr;
  if (const cudaError_t status = cudaMalloc(&memory, bytes); !ok(status))
    return cuda_failure(status == cudaErrorMemoryAllocation ? errc::capacity_exhausted : code,
                        "cudaMalloc", status);
  return device_ptr(memory);
}

// The bytes one staging slot holds: large enough for full-speed PCIe copies and big reads.
constexpr std::size_t staging_chunk_bytes = std::size_t{16} << 20;
// Idle staging sets a device keeps for reuse (each pins 2 x staging_chunk_bytes of host memory).
constexpr std::size_t max_idle_staging = 4;

// Pinned staging for one load at a time: the double buffer, a copy stream of its own (so loads
// overlap one another and inference) and, per slot, an event recorded after the slot's copy.
struct staging_set {
  stream_ptr stream;
  pinned_ptr buffers[2];
  event_ptr copied[2];
};
using staging_ptr = std::unique_ptr<staging_set>;

expected<staging_ptr> new_staging_set(errc code) {
  auto set = std::make_unique<staging_set>();
  auto stream = new_stream(code);
  if (!stream) return std::move(stream).error();
  set->stream = std::move(*stream);
  for (std::size_t slot = 0; slot < 2; ++slot) {
    void* buffer = nullptr;
    WARM_CUDA_CHECK(code, cudaMallocHost(&buffer, staging_chunk_bytes));
    set->buffers[slot].reset(buffer);
    cudaEvent_t event = nullptr;
    // Blocking sync: a loader thread waiting on a copy sleeps instead of spinning.
    WARM_CUDA_CHECK(
        code, cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync));
    set->copied[slot].reset(event);
  }
  return expected<staging_ptr>(std::move(set));
}

// y[r, c] = act(y[r, c] + bias[c]) for the `count` elements of row-major y with `width` columns.
__global__ void add_bias_activate(float* y, const float* bias, std::uint64_t width,
                                  std::uint64_t count, activation act) {
  const std::uint64_t stride = std::uint64_t{blockDim.x} * gridDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float x = y[i] + bias[i % width];
    y[i] = act == activation::relu   ? fmaxf(x, 0.0f)
           : act == activation::gelu ? 0.5f * x * (1.0f + erff(x * 0.7071067811865476f))  // exact
           : act == activation::tanh ? tanhf(x)
                                     : x;
  }
}

// A GPU as a warm::device. Thread-safe: allocation and uploads need no lock (cudaMalloc is
// thread-safe and each load owns its staging set); inference serializes on compute_mutex_.
// Every entry point first makes this GPU the calling thread's current device.
class cuda_device final : public device {
 public:
  // Takes the resources make_cuda_device created on GPU `ordinal`: the compute stream, a cuBLAS
  // handle bound to it and a first staging set.
  cuda_device(int ordinal, std::uint64_t capacity, stream_ptr stream, blas_ptr blas,
              staging_ptr staging)
      : device("cuda:" + std::to_string(ordinal), capacity),
        ordinal_(ordinal),
        stream_(std::move(stream)),
        blas_(std::move(blas)) {
    idle_staging_.push_back(std::move(staging));
  }
  // Every buffer, resident model and upload target made by this device must be gone.
  ~cuda_device() override { (void)cudaSetDevice(ordinal_); }  // members free on this GPU

  int ordinal() const { return ordinal_; }
  // A staging set for one load: an idle one if any, else a new one (load_failed on failure).
  expected<staging_ptr> take_staging();
  // Gives back a set with no copy in flight, for a later load to reuse.
  void return_staging(staging_ptr set);

 protected:
  expected<std::unique_ptr<device_buffer>> allocate_memory(std::uint64_t bytes) override;
  std::unique_ptr<upload_target> upload_target_for(device_buffer& destination) override;
  expected<void> run(const dense_resident& model, const float* input, std::uint64_t batch,
                     float* output) override;

 private:
  class buffer;
  expected<void> run_locked(const dense_resident& model, const float* input, std::uint64_t batch,
                            float* output);
  expected<float*> reserve_scratch(std::uint64_t floats);

  const int ordinal_;
  std::mutex staging_mutex_;  // guards idle_staging_
  std::vector<staging_ptr> idle_staging_;
  // One inference at a time: the cuBLAS handle, its stream and the scratch activations are used
  // only under compute_mutex_. Simple and correct; one GEMM chain already keeps the GPU busy.
  std::mutex compute_mutex_;
  stream_ptr stream_;
  blas_ptr blas_;
  device_ptr scratch_;  // 2 x batch x widest floats (ping-pong), grow-only, not budgeted
  std::uint64_t scratch_floats_ = 0;
};

// Device memory charged to its device's budget: destruction frees it and returns size() bytes.
class cuda_device::buffer final : public device_buffer {
 public:
  buffer(cuda_device& owner, device_ptr memory, std::uint64_t bytes)
      : device_buffer(bytes), owner_(&owner), memory_(std::move(memory)) {}
  ~buffer() override {
    (void)cudaSetDevice(owner_->ordinal_);
    memory_.reset();
    owner_->release(size());
  }
  void* address() const override { return memory_.get(); }

 private:
  cuda_device* owner_;  // borrowed; outlives the buffer (device_buffer's contract)
  device_ptr memory_;
};

// Double-buffered upload into device memory: slot k's chunk goes from pinned staging to the
// destination on the staging set's stream; wait(k) blocks on the event recorded after that copy.
// If no staging set could be had, every wait() and submit() fails with that error; upload()
// calls wait(slot) before stage(slot), so it stops before staging anything.
class cuda_upload_target final : public upload_target {
 public:
  cuda_upload_target(cuda_device& owner, device_buffer& destination)
      : owner_(&owner),
        destination_(static_cast<char*>(destination.address())),
        destination_bytes_(destination.size()) {
    auto staging = owner.take_staging();
    if (staging) {
      staging_ = std::move(*staging);
    } else {
      failure_ = std::move(staging).error();
    }
  }
  ~cuda_upload_target() override {
    // upload() leaves no copy in flight; a set whose stream reports an error is not reused.
    if (staging_ && ok(cudaStreamSynchronize(staging_->stream.get())))
      owner_->return_staging(std::move(staging_));
  }

  std::size_t slots() const override { return 2; }
  std::size_t chunk_bytes() const override { return staging_chunk_bytes; }

  void* stage(std::size_t slot, std::uint64_t offset, std::size_t bytes) override {
    assert(staging_ && slot < 2 && bytes <= staging_chunk_bytes);
    assert(offset + bytes <= destination_bytes_);
    (void)offset, (void)bytes;
    return staging_ ? staging_->buffers[slot].get() : nullptr;
  }

  expected<void> submit(std::size_t slot, std::uint64_t offset, std::size_t bytes) override {
    if (!staging_) return *failure_;
    assert(offset + bytes <= destination_bytes_);
    cudaStream_t stream = staging_->stream.get();
    WARM_CUDA_CHECK(errc::load_failed, cudaSetDevice(owner_->ordinal()));
    WARM_CUDA_CHECK(errc::load_failed,
                    cudaMemcpyAsync(destination_ + offset, staging_->buffers[slot].get(), bytes,
                                    cudaMemcpyHostToDevice, stream));
    WARM_CUDA_CHECK(errc::load_failed, cudaEventRecord(staging_->copied[slot].get(), stream));
    return {};
  }

  expected<void> wait(std::size_t slot) override {
    if (!staging_) return *failure_;
    // An event never recorded (an idle slot) counts as complete.
    WARM_CUDA_CHECK(errc::load_failed, cudaEventSynchronize(staging_->copied[slot].get()));
    return {};
  }

 private:
  cuda_device* owner_;  // borrowed; outlives the target
  char* destination_;   // device address
  std::uint64_t destination_bytes_;
  staging_ptr staging_;  // null when failure_ is set
  std::optional<error> failure_;
};

expected<staging_ptr> cuda_device::take_staging() {
  {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (!idle_staging_.empty()) {
      auto set = std::move(idle_staging_.back());
      idle_staging_.pop_back();
      return expected<staging_ptr>(std::move(set));
    }
  }
  WARM_CUDA_CHECK(errc::load_failed, cudaSetDevice(ordinal_));
  return new_staging_set(errc::load_failed);
}

void cuda_device::return_staging(staging_ptr set) {
  std::lock_guard<std::mutex> lock(staging_mutex_);
  if (idle_staging_.size() < max_idle_staging) idle_staging_.push_back(std::move(set));
}

expected<std::unique_ptr<device_buffer>> cuda_device::allocate_memory(std::uint64_t bytes) {
  WARM_CUDA_CHECK(errc::load_failed, cudaSetDevice(ordinal_));
  auto memory = new_device_memory(bytes, errc::load_failed);
  if (!memory) return std::move(memory).error();
  return std::unique_ptr<device_buffer>(std::make_unique<buffer>(*this, std::move(*memory), bytes));
}

std::unique_ptr<upload_target> cuda_device::upload_target_for(device_buffer& destination) {
  return std::make_unique<cuda_upload_target>(*this, destination);
}

expected<void> cuda_device::run(const dense_resident& model, const float* input,
                                std::uint64_t batch, float* output) {
  std::lock_guard<std::mutex> lock(compute_mutex_);
  auto done = run_locked(model, input, batch, output);
  // After a failure, let queued work drain before the caller frees the weights or the output.
  if (!done) (void)cudaStreamSynchronize(stream_.get());
  return done;
}

expected<void> cuda_device::run_locked(const dense_resident& model, const float* input,
                                       std::uint64_t batch, float* output) {
  const dense_spec& spec = model.spec();
  const std::uint64_t width = spec.widest();
  // infer() refuses these; the guard also keeps every GEMM dimension within cuBLAS's int.
  if (batch == 0 || width == 0 || batch > max_activation_elements / width)
    return make_error(errc::internal, name() + ": batch " + std::to_string(batch) + " x width " +
                                          std::to_string(width) +
                                          " exceeds max_activation_elements");
  WARM_CUDA_CHECK(errc::internal, cudaSetDevice(ordinal_));
  auto scratch = reserve_scratch(2 * batch * width);
  if (!scratch) return std::move(scratch).error();
  float* current = *scratch;
  float* next = current + batch * width;
  cudaStream_t stream = stream_.get();
  WARM_CUDA_CHECK(errc::internal,
                  cudaMemcpyAsync(current, input, batch * spec.input_width() * sizeof(float),
                                  cudaMemcpyHostToDevice, stream));
  const auto* base = static_cast<const char*>(model.weights().address());
  const float one = 1.0f;
  const float zero = 0.0f;
  const int rows = static_cast<int>(batch);
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const dense_layer& layer = spec.layers[i];
    const auto* weight = reinterpret_cast<const float*>(base + layer.weight_offset);
    const auto* bias = reinterpret_cast<const float*>(base + layer.bias_offset);
    const int in = static_cast<int>(layer.in);
    const int out = static_cast<int>(layer.out);
    // Row-major Y[batch,out] = X[batch,in] W^T. cuBLAS is column-major, and the same bytes are
    // Y'(out x batch) = W'^T X' where W' = W seen as (in x out) and X' = X seen as (in x batch).
    WARM_CUDA_CHECK(errc::internal,
                    cublasSgemm(blas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, weight,
                                in, current, in, &zero, next, out));
    const std::uint64_t count = batch * layer.out;
    const auto blocks = static_cast<unsigned>(std::min<std::uint64_t>((count + 255) / 256, 4096));
    const bool last = i + 1 == spec.layers.size();
    add_bias_activate<<<blocks, 256, 0, stream>>>(next, bias, layer.out, count,
                                                  last ? activation::none : spec.activation);
    WARM_CUDA_CHECK(errc::internal, cudaGetLastError());
    std::swap(current, next);
  }
  WARM_CUDA_CHECK(errc::internal,
                  cudaMemcpyAsync(output, current, batch * spec.output_width() * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream));
  WARM_CUDA_CHECK(errc::internal, cudaStreamSynchronize(stream));
  return {};
}

expected<float*> cuda_device::reserve_scratch(std::uint64_t floats) {
  if (floats > scratch_floats_) {
    scratch_.reset();  // no work is queued: every run ends with its stream synchronized
    scratch_floats_ = 0;
    auto memory = new_device_memory(floats * sizeof(float), errc::internal);
    if (!memory) return std::move(memory).error();
    scratch_ = std::move(*memory);
    scratch_floats_ = floats;
  }
  return static_cast<float*>(scratch_.get());
}

}  // namespace

expected<int> cuda_device_count() {
  int count = 0;
  // Without a GPU or driver this fails (35, insufficient driver; 100, no device): said so first,
  // CUDA's own words after.
  if (const cudaError_t status = cudaGetDeviceCount(&count); !ok(status)) {
    (void)cudaGetLastError();
    const bool none = status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice;
    return make_error(
        errc::unavailable,
        std::string("no CUDA device: ") +
            (none ? std::string("this machine has no NVIDIA GPU with a working driver (CUDA: ") +
                        describe(status) + ")"
                  : std::string(describe(status))));
  }
  if (count <= 0)
    return make_error(errc::unavailable, "no CUDA device: this machine has no NVIDIA GPU");
  return count;
}

expected<std::unique_ptr<device>> make_cuda_device(int ordinal,
                                                   std::optional<std::uint64_t> capacity) {
  auto count = cuda_device_count();
  if (!count) return std::move(count).error();
  const std::string name = "cuda:" + std::to_string(ordinal);
  if (ordinal < 0) return make_error(errc::invalid_argument, name + ": negative GPU ordinal");
  if (ordinal >= *count)
    return make_error(errc::not_found,
                      name + ": no such GPU (" + std::to_string(*count) + " found)");
  WARM_CUDA_CHECK(errc::unavailable, cudaSetDevice(ordinal));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  WARM_CUDA_CHECK(errc::unavailable, cudaMemGetInfo(&free_bytes, &total_bytes));
  if (capacity && (*capacity == 0 || *capacity > total_bytes))
    return make_error(errc::invalid_argument, name + ": capacity " + format_bytes(*capacity) +
                                                  " must be above zero and at most the GPU's " +
                                                  format_bytes(total_bytes));
  const std::uint64_t budget = capacity ? *capacity : std::uint64_t{free_bytes} / 10 * 9;

  auto stream = new_stream(errc::unavailable);
  if (!stream) return std::move(stream).error();
  cublasHandle_t handle = nullptr;
  WARM_CUDA_CHECK(errc::unavailable, cublasCreate(&handle));
  blas_ptr blas(handle);
  WARM_CUDA_CHECK(errc::unavailable, cublasSetStream(handle, stream->get()));
  auto staging = new_staging_set(errc::unavailable);
  if (!staging) return std::move(staging).error();
  return std::unique_ptr<device>(std::make_unique<cuda_device>(
      ordinal, budget, std::move(*stream), std::move(blas), std::move(*staging)));
}

}  // namespace warm

#undef WARM_CUDA_CHECK
