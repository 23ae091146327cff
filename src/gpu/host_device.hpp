// The host device: model weights in 64-byte-aligned host memory, inference with OpenBLAS sgemm
// plus a bias/activation pass. Loads read the file straight into the weights buffer (one copy
// from the page cache).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "warm/device.hpp"

namespace warm {

// A host device with `capacity` bytes of budget (named "host"). `allocation_fault` (fault
// injection, see warm/fault_injection.hpp) is asked before each allocation; true makes it fail as
// out of memory would. `before_free` (tests) runs on the freeing thread before each buffer's
// memory is freed: it may block, as a slow munmap or cudaFree would.
std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name = "host",
                                         std::function<bool()> allocation_fault = nullptr,
                                         std::function<void()> before_free = nullptr);

}  // namespace warm
