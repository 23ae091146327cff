// A build without libtorch: no torchscript backend (find_backend says which kinds it serves).
#include "backends/builtin.hpp"

namespace warm {

const backend* torchscript_backend_instance() { return nullptr; }

void set_torchscript_threads(int) {}

}  // namespace warm
