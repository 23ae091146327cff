// The host device: model weights in 64-byte-aligned host memory, inference with OpenBLAS sgemm
// plus a bias/activation pass. Loads read the file straight into the weights buffer (one copy
// from the page cache).
#pragma once

#include <cstdint>
#include <memory>

#include "warm/device.hpp"

namespace warm {

// A host device with `capacity` bytes of budget (named "host").
std::unique_ptr<device> make_host_device(std::uint64_t capacity, std::string name = "host");

}  // namespace warm
