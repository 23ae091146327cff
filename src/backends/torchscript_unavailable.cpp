// A build without libtorch: no torchscript backend (find_backend says which kinds it serves).
#include "backends/builtin.hpp"

namespace warm {

const backend* torchscript_backend_instance() {
  return nullptr;
}

void set_torchscript_threads(int) {}

expected<model_description> describe_torchscript_fd(int, const std::string& path) {
  return make_error(errc::unavailable, path + ": this build has no TorchScript backend (libtorch)");
}

}  // namespace warm
