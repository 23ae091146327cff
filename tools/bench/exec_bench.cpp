#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/device.hpp"
#include "warm/model_writer.hpp"

namespace warm::bench {

double percentile(std::vector<double>& samples, double pct) {
  if (samples.empty()) return 0;
  auto index =
      static_cast<std::size_t>(pct / 100.0 * static_cast<double>(samples.size() - 1) + 0.5);
  std::nth_element(samples.begin(), samples.begin() + index, samples.end());
  return samples[index];
}

int run_exec(const exec_options& options) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("warm-bench-exec-" + std::to_string(::getpid()));
  auto path = (dir / "model.safetensors").string();
  auto fail = [&](const error& e) {
    std::fprintf(stderr, "warm-bench exec: %s\n", e.message.c_str());
    fs::remove_all(dir);
    return 1;
  };
  if (auto r = write_dense_model(path, {options.layers, activation::relu, 1}); !r)
    return fail(r.error());
  auto model = open_model_file(path);
  if (!model) return fail(model.error());
  auto spec = parse_device_spec(options.device);
  if (!spec) return fail(spec.error());
  spec->capacity = model->spec.data_bytes + (std::uint64_t{64} << 20);
  auto dev = make_device(*spec);
  if (!dev) return fail(dev.error());
  auto resident = (*dev)->load(*model);
  if (!resident) return fail(resident.error());
  fs::remove_all(dir);

  std::vector<float> input(options.batch * model->spec.input_width()), output;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (auto& x : input)
    x = uniform(rng);

  using clock = std::chrono::steady_clock;
  std::vector<double> latencies_us;
  latencies_us.reserve(1 << 20);
  auto start = clock::now();
  auto deadline = start + std::chrono::duration<double>(options.seconds);
  for (auto now = start; now < deadline;) {
    auto r = (*dev)->infer(**resident, input.data(), input.size(), options.batch, output);
    auto done = clock::now();
    if (!r) return fail(r.error());
    latencies_us.push_back(std::chrono::duration<double, std::micro>(done - now).count());
    now = done;
  }
  double elapsed = std::chrono::duration<double>(clock::now() - start).count();
  double rps = static_cast<double>(latencies_us.size()) / elapsed;
  nlohmann::ordered_json out{{"scenario", "exec"},
                             {"device", options.device},
                             {"layers", options.layers},
                             {"batch", options.batch},
                             {"requests", latencies_us.size()},
                             {"rps", rps},
                             {"p50_us", percentile(latencies_us, 50)},
                             {"p99_us", percentile(latencies_us, 99)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
