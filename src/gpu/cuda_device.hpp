// The CUDA backend of warm::device: weights in device memory (cudaMalloc, never managed memory),
// loads double-buffered through pinned staging, inference with cuBLAS. Implemented in
// cuda_device.cu; this header is plain C++ so code built without nvcc can call the factory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "warm/device.hpp"
#include "warm/error.hpp"

namespace warm {

// Creates the device "cuda:<ordinal>" on GPU `ordinal`.
//
// `capacity` is the device's byte budget for resident models; nullopt means 90% of the GPU's free
// memory now. Memory outside the budget: one pinned staging set per concurrent load (2 x 16 MiB
// of host memory; up to 4 are kept for reuse) and a grow-only inference scratch buffer of
// 2 x batch x widest-layer floats on the GPU (at most 1 GiB, see max_activation_elements).
//
// Errors: unavailable when there is no usable CUDA device or creating the stream, cuBLAS handle
// or staging fails (the message carries the driver's reason); invalid_argument for a negative
// ordinal, a zero capacity or one above the GPU's total memory; not_found for an ordinal past
// the last GPU. Never crashes on a machine without a GPU or driver.
//
// Threading: the device is thread-safe as device.hpp promises. Calls change the calling
// thread's current CUDA device (cudaSetDevice) to this GPU.
expected<std::unique_ptr<device>> make_cuda_device(int ordinal,
                                                   std::optional<std::uint64_t> capacity);

}  // namespace warm
