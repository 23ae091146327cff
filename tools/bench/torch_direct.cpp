#include "torch_direct.hpp"

#include <torch/script.h>

#include <ATen/Parallel.h>

#include <chrono>

#include "backends/torch_types.hpp"

namespace warm::bench {
namespace {

class direct final : public torch_direct {
 public:
  explicit direct(torch::jit::Module module) : module_(std::move(module)) {}

  bool run(const std::vector<tensor>& inputs, std::string& why) override {
    thread_local bool threads_set = false;
    if (!threads_set) at::set_num_threads(1), threads_set = true;
    try {
      c10::InferenceMode inference;
      std::vector<c10::IValue> arguments;
      for (const auto& t : inputs) {
        auto type = torch_type(t.type);
        if (!type) {
          why = "unsupported dtype";
          return false;
        }
        std::vector<std::int64_t> sizes(t.shape.begin(), t.shape.end());
        arguments.emplace_back(
            torch::from_blob(const_cast<std::byte*>(t.data.data()), sizes, *type));
      }
      auto result = module_.forward(std::move(arguments));
      return !result.isNone();
    } catch (const std::exception& e) {
      why = e.what();
      return false;
    }
  }

 private:
  torch::jit::Module module_;
};

}  // namespace

expected<std::unique_ptr<torch_direct>> torch_direct::load(const std::string& path) {
  try {
    auto module = torch::jit::load(path, torch::kCPU);
    module.eval();
    return std::unique_ptr<torch_direct>(std::make_unique<direct>(std::move(module)));
  } catch (const std::exception& e) {
    return make_error(errc::load_failed, path + ": " + e.what());
  }
}

expected<double> time_torch_load(const std::string& path, const std::vector<tensor>* first_call) {
  auto start = std::chrono::steady_clock::now();
  try {
    auto module = torch::jit::load(path, torch::kCPU);
    module.eval();
    if (first_call) {
      direct run(std::move(module));
      std::string why;
      if (!run.run(*first_call, why)) return make_error(errc::load_failed, path + ": " + why);
    }
  } catch (const std::exception& e) {
    return make_error(errc::load_failed, path + ": " + e.what());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace warm::bench
