#include "support/runtime_fixture.hpp"

#include <cstring>
#include <thread>

#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace warm::test {

runtime_fixture::runtime_fixture(std::vector<std::string> model_names,
                                 std::vector<std::string> device_specs, std::uint32_t loads,
                                 std::function<void(runtime_options&)> adjust_options)
    : devices(std::move(device_specs)),
      max_concurrent_loads(loads),
      adjust(std::move(adjust_options)),
      names(std::move(model_names)) {
  std::uint64_t seed = 1;
  for (auto& name : names) {
    auto written = write_dense_model(dir / ("repo/" + name + "/1/" + model_file_name),
                                     {{16, 8}, activation::relu, seed++});
    if (!written) throw std::runtime_error(written.error().to_string());
  }
  start();
}

void runtime_fixture::start() {
  rt.reset();
  runtime_options options;
  options.devices = devices;
  options.repositories = {dir / "repo"};
  options.state_dir = dir / "state";
  options.max_concurrent_loads = max_concurrent_loads;
  options.time = time;
  options.loader = loader;
  options.scheduler_threads = 2;
  options.inference_threads = 2;
  options.policy = "lru";  // tests with known victims; others choose theirs in `adjust`
  if (adjust) adjust(options);
  auto created = runtime::create(std::move(options));
  if (!created) throw std::runtime_error(created.error().to_string());
  rt = std::move(*created);
}

void runtime_fixture::register_all(bool load_now) {
  for (auto& name : names) {
    auto r = rt->register_model(name, {name}, load_now).get();
    if (!r) throw std::runtime_error(r.error().to_string());
  }
}

tensor input(std::uint64_t batch, std::uint64_t width, float value) {
  tensor t;
  t.name = "input";
  t.type = dtype::f32;
  t.shape = {batch, width};
  std::vector<float> values(batch * width, value);
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

model_state state_of(runtime& rt, const std::string& id) {
  auto st = rt.status(id).get();
  return st ? st->state : model_state::not_found;
}

}  // namespace warm::test
