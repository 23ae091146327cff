// The host device: model weights in 64-byte-aligned host memory, inference with OpenBLAS sgemm
// plus a bias/activation pass. Loads read the file straight into the weights buffer (one copy
// from the page cache).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "warm/device.hpp"

namespace warm {

// Hooks for fault injection and tests; each may be empty.
struct host_device_hooks {
  // Asked before each allocation; true makes it fail as out of memory would.
  std::function<bool()> allocation_fault;
  // Called with the batch before each inference, on the inferring thread; may block (a stalled
  // device).
  std::function<void(std::uint64_t batch)> before_run;
  // Runs on the freeing thread before each buffer's memory is freed; may block, as a slow munmap
  // or cudaFree would.
  std::function<void()> before_free;
};

// How the host device runs a layer of `batch` rows. One cblas_sgemv per row while the batch is at
// most host_row_by_row_limit(the layer's weight bytes): OpenBLAS's sgemm packs the whole weight
// matrix on every call, a fixed cost of a few matrix-vector products, which a few rows do not
// earn back while the weights stay in the caches from one row to the next (6 rows); a layer over
// 8 MiB does not stay there, each sgemv reads it from memory again, and one sgemm reading it once
// wins from 4 rows on (3). Above the limit, one cblas_sgemm over host_padded_rows(batch) rows: the
// batch padded with zero rows to a multiple of four, because OpenBLAS's x86-64 kernels take four
// rows at a time and each leftover group of one to three rows costs another pass over the packed
// weights. Measured with one BLAS thread per inference (runtime_options::blas_threads' default):
// docs/benchmarks.md, warm-bench exec and batch.
std::uint64_t host_row_by_row_limit(std::uint64_t weight_bytes);
std::uint64_t host_padded_rows(std::uint64_t batch);

// A host device with `capacity` bytes of budget (named "host" unless `name` says otherwise).
std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name = "host",
                                         host_device_hooks hooks = {});

}  // namespace warm
