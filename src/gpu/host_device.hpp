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
// out of memory would. `before_run` (fault injection too) is called with the batch before each
// inference, on the inferring thread; it may block (a stalled device).
std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name = "host",
                                         std::function<bool()> allocation_fault = nullptr,
                                         std::function<void(std::uint64_t)> before_run = nullptr);

}  // namespace warm
