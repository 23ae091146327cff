#include "gpu/host_device.hpp"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "gpu/activation.hpp"
#include "gpu/host_pool.hpp"
#include "gpu/upload_pipeline.hpp"
#include "warm/units.hpp"

namespace warm {

void add_bias_activate(float* y, const float* bias, std::uint64_t rows, std::uint64_t cols,
                       activation act) {
  for (std::uint64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    switch (act) {  // hoisted so each loop vectorizes
      case activation::none:
        for (std::uint64_t c = 0; c < cols; ++c)
          row[c] += bias[c];
        break;
      case activation::relu:
        for (std::uint64_t c = 0; c < cols; ++c)
          row[c] = std::max(row[c] + bias[c], 0.0f);
        break;
      default:
        for (std::uint64_t c = 0; c < cols; ++c)
          row[c] = activate(act, row[c] + bias[c]);
        break;
    }
  }
}

namespace {

constexpr std::size_t host_alignment = 64;
// Buffers this large or larger are anonymous mappings rather than heap blocks.
constexpr std::size_t mapping_threshold = std::size_t{2} << 20;

// Host memory for weights. Small buffers come from aligned_alloc. Large ones come from the
// device's pool (gpu/host_pool.hpp: faulted in once, then reused, so a load into it is one copy at
// memory speed); when the pool has no free run long enough (it is fragmented), from an anonymous
// mapping of their own populated up front with MAP_POPULATE (one kernel pass zero-fills it, ~35%
// faster than a page fault per 4 KiB during the read; MADV_HUGEPAGE was 5x slower for such
// per-load mappings because of direct compaction).
struct host_memory {
  void* memory = nullptr;
  std::size_t mapped = 0;           // the length of its own mapping; 0 for heap or pool memory
  std::shared_ptr<host_pool> pool;  // set when it is a pool block

  static host_memory allocate(std::size_t bytes, const std::shared_ptr<host_pool>& pool) {
    host_memory m;
    if (bytes < mapping_threshold) {
      std::size_t rounded = (bytes + host_alignment - 1) / host_alignment * host_alignment;
      m.memory = std::aligned_alloc(host_alignment, rounded == 0 ? host_alignment : rounded);
      return m;
    }
    if (pool) {
      if (void* block = pool->take(bytes)) {
        m.memory = block;
        m.pool = pool;
        return m;
      }
    }
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (memory == MAP_FAILED) return m;
    m.memory = memory;
    m.mapped = bytes;
    return m;
  }
  void free() {
    if (pool)
      pool->give_back(memory);
    else if (mapped)
      ::munmap(memory, mapped);
    else
      std::free(memory);
  }
};

class host_buffer final : public device_buffer {
 public:
  host_buffer(std::uint64_t size, host_memory memory, std::function<void()> before_free,
              std::function<void(std::uint64_t)> on_free)
      : device_buffer(size),
        memory_(std::move(memory)),
        before_free_(std::move(before_free)),
        on_free_(std::move(on_free)) {}
  ~host_buffer() override {
    if (before_free_) before_free_();
    memory_.free();
    on_free_(size());
  }
  void* address() const override { return memory_.memory; }

 private:
  host_memory memory_;
  std::function<void()> before_free_;
  std::function<void(std::uint64_t)> on_free_;
};

// One slot, staging straight into the destination: the read() is the only copy.
class direct_target final : public upload_target {
 public:
  explicit direct_target(device_buffer& destination)
      : base_(static_cast<char*>(destination.address())) {}
  std::size_t slots() const override { return 1; }
  std::size_t chunk_bytes() const override { return std::size_t{64} << 20; }
  void* stage(std::size_t, std::uint64_t offset, std::size_t) override { return base_ + offset; }
  expected<void> submit(std::size_t, std::uint64_t, std::size_t) override { return {}; }
  expected<void> wait(std::size_t) override { return {}; }

 private:
  char* base_;
};

class host_device final : public device {
 public:
  host_device(std::uint64_t capacity, std::string name, host_device_hooks hooks,
              std::shared_ptr<host_pool> pool)
      : device(std::move(name), capacity), hooks_(std::move(hooks)), pool_(std::move(pool)) {}

  bool host() const override { return true; }

  // The pool's memory, for operators: how much of it is faulted in (stays resident), in blocks
  // now, and the longest free run (a model longer than it gets a mapping of its own).
  std::string state() const override {
    if (!pool_) return {};
    auto u = pool_->now();
    return "pool " + format_bytes(u.touched) + " faulted in at most, " + format_bytes(u.taken) +
           " in " + std::to_string(u.blocks) + " block" + (u.blocks == 1 ? "" : "s") +
           ", longest free run " + format_bytes(u.largest_free);
  }

 protected:
  expected<std::unique_ptr<device_buffer>> allocate_memory(std::uint64_t bytes) override {
    if (hooks_.allocation_fault && hooks_.allocation_fault())
      return make_error(errc::capacity_exhausted, name() + ": out of memory allocating " +
                                                      std::to_string(bytes) +
                                                      " bytes (injected fault)");
    auto memory = host_memory::allocate(bytes, pool_);
    if (!memory.memory)
      return make_error(errc::capacity_exhausted,
                        "host: out of memory allocating " + std::to_string(bytes) + " bytes");
    return std::unique_ptr<device_buffer>(std::make_unique<host_buffer>(
        bytes, std::move(memory), hooks_.before_free, [this](std::uint64_t n) { release(n); }));
  }

  std::unique_ptr<upload_target> upload_target_for(device_buffer& destination) override {
    return std::make_unique<direct_target>(destination);
  }

  expected<void> run(const dense_resident& model, const float* input, std::uint64_t batch,
                     float* output) override {
    if (hooks_.before_run) hooks_.before_run(batch);
    const auto& spec = model.spec();
    const auto* base = static_cast<const char*>(model.weights().address());
    auto row_by_row = [&](const dense_layer& layer) {
      return batch <= host_row_by_row_limit(layer.in * layer.out * sizeof(float));
    };
    // Every activation buffer holds `rows` rows: the padded batch once any layer runs an sgemm.
    const bool any_sgemm = !std::all_of(spec.layers.begin(), spec.layers.end(), row_by_row);
    const std::uint64_t rows = any_sgemm ? host_padded_rows(batch) : batch;
    // Two ping-pong activation buffers per thread, reused across calls so the hit path allocates
    // nothing. A request larger than the retained limit gets buffers that die with the call, so
    // one huge batch does not pin memory to a thread forever.
    constexpr std::uint64_t retained_elements = std::uint64_t{4} << 20;  // 16 MiB per buffer
    thread_local std::vector<float> retained[2];
    std::vector<float> transient[2];
    auto* scratch = rows * spec.widest() <= retained_elements ? retained : transient;
    auto buffer = [&](std::size_t which, std::uint64_t elements) {
      if (scratch[which].size() < elements) scratch[which].resize(elements);
      return scratch[which].data();
    };
    const float* x = input;
    float* x_buffer = nullptr;      // x when it is one of the buffers (all `rows` rows of it)
    bool x_padded = rows == batch;  // whether x's rows past the batch are there and finite
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
      const auto& layer = spec.layers[i];
      const bool last = i + 1 == spec.layers.size();
      const bool by_rows = row_by_row(layer);
      if (!by_rows && !x_padded) {  // zero rows after the batch's, for the sgemm
        if (!x_buffer) {            // the input: copied into the buffer this layer does not write
          x_buffer = buffer(1 - i % 2, rows * layer.in);
          std::memcpy(x_buffer, input, batch * layer.in * sizeof(float));
          x = x_buffer;
        }
        std::memset(x_buffer + batch * layer.in, 0, (rows - batch) * layer.in * sizeof(float));
      }
      // The last layer writes the caller's output, unless its rows are padded.
      float* y = last && (by_rows || rows == batch) ? output : buffer(i % 2, rows * layer.out);
      const auto* w = reinterpret_cast<const float*>(base + layer.weight_offset);
      const auto* b = reinterpret_cast<const float*>(base + layer.bias_offset);
      // y[rows, out] = x[rows, in] · w[out, in]^T
      auto m = static_cast<blasint>(rows), n = static_cast<blasint>(layer.out),
           k = static_cast<blasint>(layer.in);
      if (by_rows)
        for (std::uint64_t r = 0; r < batch; ++r)
          cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w, k, x + r * layer.in, 1, 0.0f,
                      y + r * layer.out, 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
      // The batch's rows alone: no row of a product depends on another, so whatever the padding
      // rows come to, they change nothing and are never read back.
      add_bias_activate(y, b, batch, layer.out, last ? activation::none : spec.activation);
      if (y != output && last) std::memcpy(output, y, batch * layer.out * sizeof(float));
      x = x_buffer = y;
      x_padded = !by_rows;  // an sgemm wrote every row; row by row, the batch's alone
    }
    return {};
  }

 private:
  host_device_hooks hooks_;          // fault injection and tests
  std::shared_ptr<host_pool> pool_;  // large buffers; null: each its own mapping
};

}  // namespace

std::uint64_t host_row_by_row_limit(std::uint64_t weight_bytes) {
  constexpr std::uint64_t cached_weight_bytes = std::uint64_t{8} << 20;
  return weight_bytes > cached_weight_bytes ? 3 : 6;
}

std::uint64_t host_padded_rows(std::uint64_t batch) {
  constexpr std::uint64_t multiple = 4;
  return (batch + multiple - 1) / multiple * multiple;
}

void set_host_blas_threads(int threads) {
  openblas_set_num_threads(threads < 1 ? 1 : threads);
}

std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name,
                                         host_device_hooks hooks) {
  // A pool only where a model can use it (buffers below the threshold never come from it), and
  // only where the address space can be had: without it, loads still work, at the fresh-memory
  // speed.
  std::shared_ptr<host_pool> pool;
  if (capacity >= mapping_threshold)
    if (auto reserved = host_pool::reserve(capacity)) pool = std::move(*reserved);
  return std::make_unique<host_device>(capacity, std::move(name), std::move(hooks),
                                       std::move(pool));
}

}  // namespace warm
