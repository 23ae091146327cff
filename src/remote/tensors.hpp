// Conversions between warm's values and those of the model-runtime interface
// (schemas/runtime.capnp): tensors, tensor specs, errors and model files. Shared by warmd's side
// (remote_device) and the reference runtime (tools/warm-runtime), so both read and write the
// wire the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime.capnp.h"
#include "warm/error.hpp"
#include "warm/model_io.hpp"
#include "warm/model_repository.hpp"

namespace warm {

// What one tensor or spec on the wire may be: the other side may be hostile (a runtime runs
// untrusted code), so these are checked before anything is copied or multiplied.
inline constexpr std::size_t max_wire_rank = 32;
// product(shape) x size(dtype), with each 0 dimension taken as 1, may not pass this: a shape
// whose byte count overflows (or that a 0 dimension would hide) is refused.
inline constexpr std::uint64_t max_wire_tensor_bytes = std::uint64_t{1} << 62;

void write_tensor(const tensor& t, remote::Tensor::Builder out);
// invalid_argument for an unknown dtype, a rank past max_wire_rank, a shape past
// max_wire_tensor_bytes or data whose size does not match the shape.
expected<tensor> read_tensor(remote::Tensor::Reader in);
expected<std::vector<tensor>> read_tensors(capnp::List<remote::Tensor>::Reader in);

// An inference's answer: its error, or ok and the outputs.
void write_infer_answer(const expected<std::vector<tensor>>& outputs,
                        remote::ModelRuntime::InferResults::Builder out);

void write_spec(const tensor_spec& spec, remote::TensorSpec::Builder out);
// invalid_argument for an unknown dtype or a rank past max_wire_rank; an empty dtype is an
// undeclared tensor (known = false).
expected<tensor_spec> read_spec(remote::TensorSpec::Reader in);

// errc::ok is not a warm::errc: success writes code ok with an empty message.
void write_ok(remote::Error::Builder out);
void write_error(const warm::error& e, remote::Error::Builder out);
// nullopt for ok.
std::optional<warm::error> read_error(remote::Error::Reader in);

void write_model_file(const model_location& where, remote::ModelFile::Builder out);
model_location read_model_file(remote::ModelFile::Reader in);

}  // namespace warm
