// The built-in model kind "dense": a multilayer perceptron stored as safetensors.
//
// Tensors layers.<i>.weight [out_i, in_i] and layers.<i>.bias [out_i], F32, for i = 0..L-1 with
// in_{i+1} = out_i; __metadata__ has "warm.kind": "dense" and "warm.activation" (relu, gelu,
// tanh, none), applied between layers and not after the last. Input `input` F32 [batch, in_0],
// output `output` F32 [batch, out_{L-1}]. See docs/model-format.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/model_repository.hpp"
#include "warm/safetensors.hpp"

namespace warm {

class read_file;  // an open model file (internal)

enum class activation { none, relu, gelu, tanh };

std::string_view to_string(activation act) noexcept;
std::optional<activation> parse_activation(std::string_view name) noexcept;

// One layer: where its tensors sit in the data buffer (byte offsets, 4-byte aligned).
struct dense_layer {
  std::uint64_t in = 0;
  std::uint64_t out = 0;
  std::uint64_t weight_offset = 0;  // [out, in] row-major F32
  std::uint64_t bias_offset = 0;    // [out] F32
};

// A validated dense model: everything a device needs to run it from its data buffer.
struct dense_spec {
  warm::activation activation = activation::none;
  std::vector<dense_layer> layers;
  std::uint64_t data_bytes = 0;  // size of the data buffer, the bytes a device must hold

  std::uint64_t input_width() const { return layers.front().in; }
  std::uint64_t output_width() const { return layers.back().out; }
  std::uint64_t widest() const;      // the largest in/out width, for scratch space
  std::uint64_t parameters() const;  // weights + biases
};

// Largest width accepted for one layer dimension; keeps scratch buffers and products sane.
inline constexpr std::uint64_t max_dense_width = 1u << 24;

// Checks a header against the dense rules and extracts the layout. Errors are invalid_argument
// naming what is wrong: missing or wrong metadata, unknown activation, missing/extra tensors,
// non-F32 dtypes, wrong ranks, zero or huge widths, layers that do not chain.
expected<dense_spec> dense_spec_from(const safetensors_header& header);

// A parsed model file on disk: its path, validated header and dense layout.
// It keeps the file open: a device load reads the data from the very file whose header was
// validated, never from whatever the path names by then.
struct model_file {
  std::string path;
  safetensors_header header;
  dense_spec spec;
  std::shared_ptr<const read_file> source;  // the open file
};

// Opens and validates a dense model file (header only; the data is read by a device load), beneath
// its repository root when the location has one. Errors are prefixed with the path and never
// quote the file's bytes before a valid header.
expected<model_file> open_model_file(const model_location& where);

// The same for a path given by a user (offline tools, tests): not confined to any root.
expected<model_file> open_model_file(const std::string& path);

}  // namespace warm
