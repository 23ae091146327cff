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

// A host device with `capacity` bytes of budget (named "host" unless `name` says otherwise).
std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name = "host",
                                         host_device_hooks hooks = {});

}  // namespace warm
