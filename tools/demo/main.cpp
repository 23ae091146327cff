// warm-demo: the foundation end to end, as `tools/run` shows it until the daemon exists. Writes a
// dense model into a repository, validates it, loads it onto a device, runs a batch, unloads.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>

#include "warm/device.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/units.hpp"

namespace {

int fail(const warm::error& e) {
  std::fprintf(stderr, "warm-demo: %s\n", e.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"warm-demo: write a model, load it on a device and run inference"};
  std::string repo = "demo-repo", layers = "784,512,10", device_text = "host:256MiB";
  std::uint64_t batch = 4;
  app.add_option("--repo", repo, "Model repository root")->capture_default_str();
  app.add_option("--layers", layers, "Layer widths of the demo model")->capture_default_str();
  app.add_option("--device", device_text, "Device spec")->capture_default_str();
  app.add_option("--batch", batch, "Batch size")->capture_default_str()->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  auto widths = warm::parse_widths(layers);
  if (!widths) return fail(widths.error());
  auto path = repo + "/demo/1/" + warm::model_file_name;
  if (auto r = warm::write_dense_model(path, {*widths, warm::activation::relu, 7}); !r) return fail(r.error());
  std::printf("wrote     %s (dense %s, relu)\n", path.c_str(), layers.c_str());

  auto repository = warm::model_repository::create({repo});
  if (!repository) return fail(repository.error());
  auto resolved = repository->resolve("demo");
  if (!resolved) return fail(resolved.error());
  auto model = warm::open_model_file(*resolved);
  if (!model) return fail(model.error());
  std::printf("validated %s: %zu layers, %llu parameters, %s\n", resolved->c_str(), model->spec.layers.size(),
              static_cast<unsigned long long>(model->spec.parameters()), warm::format_bytes(model->spec.data_bytes).c_str());

  auto spec = warm::parse_device_spec(device_text);
  if (!spec) return fail(spec.error());
  auto dev = warm::make_device(*spec);
  if (!dev) return fail(dev.error());
  warm::load_stats stats;
  auto resident = (*dev)->load(*model, &stats);
  if (!resident) return fail(resident.error());
  std::printf("loaded    onto %s in %.2f ms (%.2f GB/s); device uses %s of %s\n", (*dev)->name().c_str(),
              stats.seconds * 1e3, stats.gbps(), warm::format_bytes((*dev)->used()).c_str(),
              warm::format_bytes((*dev)->capacity()).c_str());

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<float> input(batch * model->spec.input_width()), output;
  for (auto& x : input) x = uniform(rng);
  if (auto r = (*dev)->infer(**resident, input.data(), input.size(), batch, output); !r) return fail(r.error());
  const auto width = model->spec.output_width();
  std::printf("inferred  batch of %llu random inputs -> output [%llu, %llu]\n", static_cast<unsigned long long>(batch),
              static_cast<unsigned long long>(batch), static_cast<unsigned long long>(width));
  for (std::uint64_t b = 0; b < batch; ++b) {
    const float* row = output.data() + b * width;
    auto best = std::max_element(row, row + width) - row;
    std::printf("          row %llu: argmax %lld (%.4f)\n", static_cast<unsigned long long>(b), static_cast<long long>(best),
                row[best]);
  }
  resident->reset();
  std::printf("unloaded  device uses %s\n", warm::format_bytes((*dev)->used()).c_str());
  return 0;
}
