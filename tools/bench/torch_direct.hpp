// The baselines of the TorchScript benches: libtorch called directly, without warm. Built only
// with the TorchScript backend (torch_direct.cpp is the bench's one libtorch translation unit).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "warm/error.hpp"
#include "warm/model_io.hpp"

namespace warm::bench {

// A module loaded with torch::jit::load, run on tensors as a libtorch user would: inputs
// wrapped with from_blob, forward() under InferenceMode, one intra-op thread (as warm runs it).
class torch_direct {
 public:
  static expected<std::unique_ptr<torch_direct>> load(const std::string& path);
  virtual ~torch_direct() = default;
  // forward() on `inputs` (in forward()'s order); false (with `why`) on an exception.
  virtual bool run(const std::vector<tensor>& inputs, std::string& why) = 0;
};

// Seconds torch::jit::load takes for `path` (the file read and the module built), and with
// `first_call`, then one forward() on those inputs (the first call of a TorchScript module also
// profiles and optimizes its graph: a libtorch user pays it before the first answer).
expected<double> time_torch_load(const std::string& path,
                                 const std::vector<tensor>* first_call = nullptr);

}  // namespace warm::bench
