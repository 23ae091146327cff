// Conversions between warm's values and those of the model-runtime interface
// (schemas/runtime.capnp): tensors, tensor specs, errors and model files. Shared by warmd's side
// (remote_device) and the reference runtime (tools/warm-runtime), so both read and write the
// wire the same way.
#pragma once

#include <vector>

#include "runtime.capnp.h"
#include "warm/error.hpp"
#include "warm/model_io.hpp"
#include "warm/model_repository.hpp"

namespace warm {

void write_tensor(const tensor& t, remote::Tensor::Builder out);
// invalid_argument for an unknown dtype or data whose size does not match the shape.
expected<tensor> read_tensor(remote::Tensor::Reader in);
expected<std::vector<tensor>> read_tensors(capnp::List<remote::Tensor>::Reader in);

void write_spec(const tensor_spec& spec, remote::TensorSpec::Builder out);
// invalid_argument for an unknown dtype; an empty dtype is an undeclared tensor (known = false).
expected<tensor_spec> read_spec(remote::TensorSpec::Reader in);

// errc::ok is not a warm::errc: success writes code ok with an empty message.
void write_ok(remote::Error::Builder out);
void write_error(const warm::error& e, remote::Error::Builder out);
// nullopt for ok.
std::optional<warm::error> read_error(remote::Error::Reader in);

void write_model_file(const model_location& where, remote::ModelFile::Builder out);
model_location read_model_file(remote::ModelFile::Reader in);

}  // namespace warm
