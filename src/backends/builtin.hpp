// The backends compiled into this build (internal to src/backends).
#pragma once

#include "warm/backend.hpp"

namespace warm {

const backend* dense_backend_instance();
// nullptr when warm was built without libtorch.
const backend* torchscript_backend_instance();
// Intra-op threads per TorchScript inference (no-op without libtorch).
void set_torchscript_threads(int threads);
// The torchscript backend's describe of an archive open on `fd`, in this process (a describe
// helper's work); unavailable without libtorch.
expected<model_description> describe_torchscript_fd(int fd, const std::string& path);

}  // namespace warm
