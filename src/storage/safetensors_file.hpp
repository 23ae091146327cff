// Reading a safetensors header from a file that is already open (see read_safetensors_header).
#pragma once

#include "storage/file.hpp"
#include "warm/safetensors.hpp"

namespace warm {

// Validates the header of the open `file`, reading only the header. Errors are prefixed with the
// file's path and never quote bytes that precede a valid JSON header.
expected<safetensors_header> read_safetensors_header(const read_file& file);

}  // namespace warm
