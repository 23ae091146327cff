// What a model takes and gives: its named, typed input and output tensors. Every backend
// describes its models this way, and everything above the backends (the runtime's input checks,
// the batcher, model metadata on every front) works from this description alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/safetensors.hpp"

namespace warm {

// A tensor as clients send it: raw little-endian bytes, row-major.
struct tensor {
  std::string name;
  warm::dtype type = warm::dtype::f32;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;
};

// One input or output. A dimension of -1 is dynamic (any size); when `batched` (model_io), the
// first dimension is the batch, written -1.
struct tensor_spec {
  std::string name;
  warm::dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  // False when the backend does not know the dtype and rank (a TorchScript model without a
  // declaration): any tensor is passed through and the backend decides.
  bool known = true;
  bool operator==(const tensor_spec& o) const {
    return name == o.name && type == o.type && shape == o.shape && known == o.known;
  }
};

struct model_io {
  std::vector<tensor_spec> inputs;
  std::vector<tensor_spec> outputs;
  // Every input's and output's first dimension is the batch: requests may be batched together
  // (rows concatenated, outputs split back), and an input given without its batch dimension is
  // taken as one row.
  bool batched = false;
  bool operator==(const model_io& o) const {
    return inputs == o.inputs && outputs == o.outputs && batched == o.batched;
  }
};

// KServe V2's datatype names: "FP32", "FP16", "BF16", "FP64", "INT64", "INT32", "INT16", "INT8",
// "UINT8", "BOOL" and the unsigned UINT16/32/64. Empty for a type V2 has no name for (F8).
std::string_view v2_name(dtype type) noexcept;
std::optional<dtype> parse_v2_dtype(std::string_view name) noexcept;

// For a batched model with one input and one output, both [batch, width] with a fixed width: that
// width (the dense models' shape, which older clients read as two numbers); 0 otherwise.
std::uint64_t input_width(const model_io& io);
std::uint64_t output_width(const model_io& io);

// IEEE half and bfloat16 from and to float, rounding to nearest even (NaN stays NaN; out of
// range becomes infinity).
std::uint16_t float_to_half(float value) noexcept;
float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bfloat16(float value) noexcept;
float bfloat16_to_float(std::uint16_t bits) noexcept;

// "input F32 [-1, 784]" style text for status lines; "input (any)" when not known.
std::string describe(const tensor_spec& spec);

// Checks a request's inputs against a model and puts them in the model's order: every input
// named once (an unnamed single tensor is the model's single input), with its declared dtype and
// rank, fixed dimensions equal, and exactly the bytes its shape says. For a batched model, an
// input one rank short gains a leading batch dimension of 1, and every input must have the same
// batch, at least 1 and at most `max_batch`. Returns the batch (1 for a model that is not
// batched); invalid_argument naming what is wrong otherwise, the inputs then unspecified.
expected<std::uint64_t> check_inputs(std::vector<tensor>& inputs, const model_io& io,
                                     std::uint64_t max_batch);

// Checks a model's answer against its declaration (`batch` rows, as check_inputs returned): as
// many outputs as io.outputs declares (when it declares any), in that order; for each declared
// output that is `known`, the same dtype and rank and every fixed dimension (>= 0) equal; every
// output exactly the bytes its shape says; and, for a batched model, every output's first
// dimension `batch` (undeclared outputs too). Pure: for answers warm did not compute (a model
// runtime's, which may be hostile). internal on a mismatch, the message a phrase naming the
// output by its declared name, to follow "answered MODEL with " ("output 'y' of 3 rows for a
// batch of 2").
expected<void> check_outputs(const std::vector<tensor>& outputs, const model_io& io,
                             std::uint64_t batch);

}  // namespace warm
