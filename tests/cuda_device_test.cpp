// GPU test of the CUDA backend (standalone: no Catch2). Loads dense models onto cuda:0 and checks
// inference against the host device, the byte accounting and the refusal of a buffer that can
// never fit. Exits 77, meson's SKIP, when the machine has no usable CUDA device; 1 on a failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "gpu/cuda_device.hpp"
#include "warm/dense_model.hpp"
#include "warm/device.hpp"
#include "warm/model_writer.hpp"

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr double tolerance = 1e-4;  // relative, against max(|expected|, 1)

int failures = 0;

// Records a failed check (main thread only).
void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
}

// Records a failure that ends the test; returns the exit status for it.
int fail(const std::string& what) {
  check(false, what);
  return 1;
}

// A directory under the system temp dir, removed with everything in it on destruction.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string name = (std::filesystem::temp_directory_path() / "warm-cuda-test-XXXXXX").string();
    if (mkdtemp(name.data()) != nullptr) path = name;
  }
  ~temp_dir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
};

// Deterministic inputs in [-1, 1].
std::vector<float> make_input(std::uint64_t count, std::uint64_t seed) {
  std::vector<float> values(count);
  for (std::uint64_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + seed));
  return values;
}

// Empty when `got` matches `want` within `tolerance`; else what differs.
std::string compare(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(1.0, std::fabs(static_cast<double>(want[i])));
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tolerance * scale))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs host " +
             std::to_string(want[i]);
  }
  return {};
}

// Infers `batch` rows on `dev`; an empty vector (and a reported failure) on error.
std::vector<float> infer(warm::device& dev, const warm::dense_resident& model, std::uint64_t batch,
                         std::uint64_t seed, std::string* failure) {
  const auto input = make_input(batch * model.spec().input_width(), seed);
  std::vector<float> output;
  auto done = dev.infer(model, input.data(), input.size(), batch, output);
  if (!done) {
    *failure = dev.name() + " infer: " + done.error().to_string();
    return {};
  }
  return output;
}

// Writes model `label` under `root`, loads it on both devices, compares inferences (from
// several threads at once when `concurrent`) and checks the accounting.
void check_model(warm::device& gpu, warm::device& host, const std::filesystem::path& root,
                 const std::string& label, const warm::dense_model_options& options,
                 bool concurrent) {
  const std::string path = (root / label / "1" / "model.safetensors").string();
  if (auto written = warm::write_dense_model(path, options); !written)
    return check(false, label + ": write: " + written.error().to_string());
  auto file = warm::open_model_file(path);
  if (!file) return check(false, label + ": open: " + file.error().to_string());
  const std::uint64_t data_bytes = file->spec.data_bytes;

  warm::load_stats stats;
  auto on_gpu = gpu.load(*file, &stats);
  if (!on_gpu) return check(false, label + ": cuda load: " + on_gpu.error().to_string());
  check(gpu.used() == data_bytes, label + ": used() " + std::to_string(gpu.used()) +
                                      " != data_bytes " + std::to_string(data_bytes));
  check(stats.bytes == data_bytes, label + ": load_stats.bytes " + std::to_string(stats.bytes));
  auto on_host = host.load(*file);
  if (!on_host) return check(false, label + ": host load: " + on_host.error().to_string());

  for (std::uint64_t batch : {std::uint64_t{1}, std::uint64_t{17}}) {
    std::string failure;
    const auto want = infer(host, **on_host, batch, batch, &failure);
    const auto got = infer(gpu, **on_gpu, batch, batch, &failure);
    if (failure.empty()) failure = compare(got, want);
    check(failure.empty(), label + " batch " + std::to_string(batch) + ": " + failure);
  }

  if (concurrent) {  // several threads share the device: results must not mix
    constexpr int threads = 4;
    constexpr int rounds = 8;
    std::vector<std::vector<float>> want(rounds);
    std::string failure;
    for (int r = 0; r < rounds; ++r)
      want[r] = infer(host, **on_host, 1 + 2 * r, r, &failure);
    check(failure.empty(), label + " host reference: " + failure);
    std::vector<std::string> thread_failures(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        for (int r = 0; r < rounds && thread_failures[t].empty(); ++r) {
          const int round = (r + t) % rounds;
          auto got = infer(gpu, **on_gpu, 1 + 2 * round, round, &thread_failures[t]);
          if (thread_failures[t].empty()) thread_failures[t] = compare(got, want[round]);
        }
      });
    for (auto& worker : workers)
      worker.join();
    for (int t = 0; t < threads; ++t)
      check(thread_failures[t].empty(),
            label + " thread " + std::to_string(t) + ": " + thread_failures[t]);
  }

  on_gpu->reset();
  check(gpu.used() == 0, label + ": used() " + std::to_string(gpu.used()) + " after unload");
}

int run() {
  auto count = warm::cuda_device_count();
  if (!count) {
    std::printf("SKIP: %s\n", count.error().to_string().c_str());
    return 77;
  }
  auto gpu = warm::make_cuda_device(0, 256 * mib);
  if (!gpu) return fail("make_cuda_device: " + gpu.error().to_string());
  warm::device& dev = **gpu;
  check(dev.name() == "cuda:0", "name() is " + dev.name());
  check(dev.capacity() == 256 * mib, "capacity() is " + std::to_string(dev.capacity()));
  check(dev.used() == 0, "a new device uses " + std::to_string(dev.used()) + " bytes");

  auto host_spec = warm::parse_device_spec("host:256MiB");
  if (!host_spec) return fail("host spec: " + host_spec.error().to_string());
  auto host = warm::make_device(*host_spec);
  if (!host) return fail("host device: " + host.error().to_string());

  temp_dir dir;
  if (dir.path.empty()) return fail("cannot create a temp dir");
  // Small: one staging chunk. Large (~40 MiB): three 16 MiB chunks, so both slots are reused.
  check_model(dev, **host, dir.path, "small", {{64, 128, 32}, warm::activation::gelu, 7}, true);
  check_model(dev, **host, dir.path, "large",
              {warm::widths_for_bytes(40 * mib), warm::activation::tanh, 11}, false);

  auto too_large = dev.allocate(dev.capacity() + 1);
  check(!too_large && too_large.error().code == warm::errc::model_too_large,
        "allocate(capacity + 1) must fail with model_too_large");
  check(dev.used() == 0, "a refused allocation changed used()");
  {
    auto buffer = dev.allocate(mib);
    check(buffer && dev.used() == mib, "allocate(1 MiB) must succeed and charge 1 MiB");
  }
  check(dev.used() == 0, "freeing a buffer must return its bytes");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  const int status = run();
  if (status == 0) std::printf("cuda_device_test: all checks passed\n");
  if (status == 1) std::fprintf(stderr, "cuda_device_test: %d check(s) failed\n", failures);
  return status;
}
