// warm-demo: the runtime end to end, as `tools/run` shows it until the daemon exists. Writes a
// dense model into a repository, starts an embedded warm::runtime, registers the model, runs a
// cold inference (one load) and a warm one (a hit), and prints the runtime's state.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"
#include "warm/units.hpp"

namespace {

int fail(const warm::error& e) {
  std::fprintf(stderr, "warm-demo: %s\n", e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"warm-demo: write a model, serve it from an embedded warm runtime"};
  std::string repo = "demo-repo", state = "demo-state", layers = "784,512,10",
              device_text = "host:256MiB";
  std::uint64_t batch = 4;
  app.add_option("--repo", repo, "Model repository root")->capture_default_str();
  app.add_option("--state", state, "State directory (the registry)")->capture_default_str();
  app.add_option("--layers", layers, "Layer widths of the demo model")->capture_default_str();
  app.add_option("--device", device_text, "Device spec")->capture_default_str();
  app.add_option("--batch", batch, "Batch size")->capture_default_str()->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  auto widths = warm::parse_widths(layers);
  if (!widths) return fail(widths.error());
  auto path = repo + "/demo/1/" + warm::model_file_name;
  if (auto r = warm::write_dense_model(path, {*widths, warm::activation::relu, 7}); !r)
    return fail(r.error());
  std::printf("wrote     %s (dense %s, relu)\n", path.c_str(), layers.c_str());

  warm::runtime_options options;
  options.devices = {device_text};
  options.repositories = {repo};
  options.state_dir = state;
  auto rt = warm::runtime::create(options);
  if (!rt) return fail(rt.error());
  auto& runtime = **rt;
  std::printf("started   runtime on %s, registry in %s/registry.db\n", device_text.c_str(),
              state.c_str());

  // Idempotent: a second run finds the model registered with the same info.
  if (auto r = runtime.register_model("demo", {"demo"}).get(); !r) return fail(r.error());
  auto status = runtime.status("demo").get();
  if (!status) return fail(status.error());
  std::printf("registered demo: %s, %s on a device\n",
              std::string(warm::to_string(status->state)).c_str(),
              warm::format_bytes(status->bytes).c_str());

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<float> values(batch * widths->front());
  for (auto& x : values)
    x = uniform(rng);
  warm::tensor input{"input", warm::dtype::f32, {batch, widths->front()}, {}};
  input.data.resize(values.size() * sizeof(float));
  std::memcpy(input.data.data(), values.data(), input.data.size());

  for (const char* round : {"cold", "warm"}) {
    auto result = runtime.infer({"demo", {input}}).get();
    if (!result) return fail(result.error());
    std::printf("inferred  (%s) by %s: %s, waited %.2f ms for the load\n", round,
                result->model.c_str(), result->cache_hit ? "cache hit" : "cache miss",
                result->load_wait_ms);
    if (std::string(round) == "warm") {
      const auto& out = result->outputs.front();
      auto width = out.shape.back();
      std::vector<float> rows(out.data.size() / sizeof(float));
      std::memcpy(rows.data(), out.data.data(), out.data.size());
      for (std::uint64_t b = 0; b < batch; ++b) {
        const float* row = rows.data() + b * width;
        auto best = std::max_element(row, row + width) - row;
        std::printf("          row %llu: argmax %lld (%.4f)\n", static_cast<unsigned long long>(b),
                    static_cast<long long>(best), row[best]);
      }
    }
  }

  auto snapshot = runtime.inspect().get();
  if (!snapshot) return fail(snapshot.error());
  for (auto& d : snapshot->devices)
    std::printf("device    %s (%s): %s of %s used, %zu resident\n", d.name.c_str(),
                d.policy.c_str(), warm::format_bytes(d.used).c_str(),
                warm::format_bytes(d.capacity).c_str(), d.resident.size());
  for (auto& m : snapshot->models)
    std::printf("model     %s: %s on %s, %llu requests, %llu hits, load %.2f ms\n", m.id.c_str(),
                std::string(warm::to_string(m.state)).c_str(), m.device.c_str(),
                static_cast<unsigned long long>(m.requests),
                static_cast<unsigned long long>(m.hits), m.loads.mean_ms);
  return 0;
}
