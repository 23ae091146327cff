// The backends compiled into this build (internal to src/backends).
#pragma once

#include "warm/backend.hpp"

namespace warm {

const backend* dense_backend_instance();
// nullptr when warm was built without libtorch.
const backend* torchscript_backend_instance();
// Intra-op threads per TorchScript inference (no-op without libtorch).
void set_torchscript_threads(int threads);

}  // namespace warm
