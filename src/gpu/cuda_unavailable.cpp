// Built when CUDA support is not compiled in: CUDA devices report themselves unavailable.
#include "gpu/cuda_device.hpp"

namespace warm {

expected<int> cuda_device_count() {
  return make_error(errc::unavailable, "no CUDA device: warm was built without CUDA support");
}

expected<std::unique_ptr<device>> make_cuda_device(int, std::optional<std::uint64_t>) {
  return make_error(errc::unavailable, "no CUDA device: warm was built without CUDA support");
}

}  // namespace warm
