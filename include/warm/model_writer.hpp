// Writes dense models with seeded random weights: for tests, the demo, benchmarks and the
// evaluation tools. The same options and seed always produce the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warm/dense_model.hpp"
#include "warm/error.hpp"

namespace warm {

struct dense_model_options {
  std::vector<std::uint64_t> widths;  // in_0, out_0 (= in_1), ..., out_last: at least two entries
  warm::activation activation = activation::relu;
  std::uint64_t seed = 1;
};

// Parses "784,512,10" into widths; invalid_argument on empty, zero, non-numeric or > max width.
expected<std::vector<std::uint64_t>> parse_widths(const std::string& text);

// Bytes of the data buffer such a model has (weights and biases, F32).
std::uint64_t dense_data_bytes(const std::vector<std::uint64_t>& widths);

// Widths of a two-layer model [in, hidden, out] whose data buffer is about `bytes` long.
std::vector<std::uint64_t> widths_for_bytes(std::uint64_t bytes, std::uint64_t in = 1024,
                                            std::uint64_t out = 16);

// Writes `path` (the file, typically <root>/<model>/<version>/model.safetensors), creating parent
// directories. Weights are uniform in [-1/sqrt(in), 1/sqrt(in)] like PyTorch's nn.Linear. The file
// is written to a temporary name in the same directory, flushed (fsync) and renamed into place, so
// readers never see a partial model, even after a crash. Memory use is bounded (streams in
// chunks) whatever the model's size.
expected<void> write_dense_model(const std::string& path, const dense_model_options& options);

// The same file as an in-memory image (for small models in tests and fuzz seeds).
expected<std::string> dense_model_bytes(const dense_model_options& options);

}  // namespace warm
