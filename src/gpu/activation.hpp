// Bias and activation, the elementwise step after each dense layer's matrix product. The host
// device calls these; the CUDA kernel implements the same formulas (keep them in step).
#pragma once

#include <cmath>
#include <cstdint>

#include "warm/dense_model.hpp"

namespace warm {

// gelu is the exact form 0.5 x (1 + erf(x / sqrt 2)), as PyTorch's nn.GELU() by default.
inline float activate(activation act, float x) {
  switch (act) {
    case activation::relu:
      return x > 0 ? x : 0;
    case activation::gelu:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case activation::tanh:
      return std::tanh(x);
    case activation::none:
      return x;
  }
  return x;
}

// y[r, c] = act(y[r, c] + bias[c]) for a row-major [rows, cols] matrix.
void add_bias_activate(float* y, const float* bias, std::uint64_t rows, std::uint64_t cols,
                       activation act);

}  // namespace warm
