// What every inference the runtime runs gives back: a model's answer checked against what the
// model declares, before any client sees it. Pure; no CAF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warm/error.hpp"
#include "warm/model_io.hpp"

namespace warm {

// `ran` (an inference of `batch` rows, check_inputs' answer) when its outputs are what `io`
// declares (check_outputs: count, dtype, rank, fixed dimensions, bytes, the batch's rows);
// internal naming `model`, the output, and its declared and actual shape otherwise ("model 'm'
// answered with output 'y' of shape [1, 3]; the model declares y F32 [-1, 5]"). An error is
// passed on as it is. Outputs of an undeclared (`known == false`) spec pass whatever they are.
// Called on every path an inference takes (inline, after a miss, batched), whatever the device:
// a file declaring what its model does not give, or a backend's bug, is an error, never an
// answer that contradicts the model's metadata.
expected<std::vector<tensor>> checked_outputs(expected<std::vector<tensor>> ran, const model_io& io,
                                              const std::string& model, std::uint64_t batch);

}  // namespace warm
