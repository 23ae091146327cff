// A runtime over a temporary repository of small dense models, with a manual clock and a
// scripted loader, for tests that drive the actors through warm::runtime.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/scripted_loader.hpp"
#include "support/test_files.hpp"
#include "warm/runtime.hpp"

namespace warm::test {

// Each model is dense [16 → 8]: (16·8 + 8)·4 = 544 bytes on a device.
inline constexpr std::uint64_t small_model_bytes = 544;

struct runtime_fixture {
  // Writes models `names` into <dir>/repo and starts a runtime on `devices`.
  explicit runtime_fixture(std::vector<std::string> names,
                           std::vector<std::string> devices = {"host:64KiB"},
                           std::uint32_t max_concurrent_loads = 2,
                           std::function<void(runtime_options&)> adjust = nullptr);

  // Starts (again) on the same repository and state directory.
  void start();
  void stop() { rt.reset(); }

  // Registers every model named at construction (asserts success).
  void register_all(bool load_now = false);

  temp_dir dir;
  std::vector<std::string> devices;
  std::uint32_t max_concurrent_loads;
  std::function<void(runtime_options&)> adjust;
  std::shared_ptr<manual_clock> time = std::make_shared<manual_clock>();
  std::shared_ptr<scripted_loader> loader = std::make_shared<scripted_loader>();
  std::vector<std::string> names;
  std::unique_ptr<runtime> rt;
};

// An F32 input [batch, width] of `value`s.
tensor input(std::uint64_t batch = 1, std::uint64_t width = 16, float value = 0.5f);

// Polls `condition` (every millisecond, up to `limit`) while actors work; false on timeout.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds limit = std::chrono::seconds(10));

// The model's state, read through the runtime.
model_state state_of(runtime& rt, const std::string& id);

}  // namespace warm::test
