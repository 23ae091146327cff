#include <algorithm>
#include <cstring>
#include <random>

#include "benches.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace warm::bench {

expected<std::unique_ptr<runtime>> single_model_runtime(const scratch_dir& dir,
                                                        const std::string& id,
                                                        const std::vector<std::uint64_t>& layers,
                                                        std::string* model_path,
                                                        const batching_options& batching,
                                                        std::optional<std::uint64_t> auto_batch) {
  auto path = (dir.path() / "repo" / id / "1" / model_file_name).string();
  if (auto r = write_dense_model(path, {layers, activation::relu, 1}); !r)
    return std::move(r).error();
  if (model_path) *model_path = path;
  runtime_options options;
  auto bytes = dense_data_bytes(layers);
  options.devices = {"host:" +
                     std::to_string(std::max<std::uint64_t>(std::uint64_t{1} << 30, 2 * bytes))};
  options.repositories = {(dir.path() / "repo").string()};
  options.state_dir = (dir.path() / "state").string();
  options.batching = batching;
  if (auto_batch) options.auto_batch = *auto_batch;
  auto created = runtime::create(options);
  if (!created) return created;
  if (auto r = (*created)->register_model(id, {id}).get(); !r) return std::move(r).error();
  return created;
}

expected<std::unique_ptr<runtime>> loaded_single_model_runtime(
    const scratch_dir& dir, const std::string& id, const std::vector<std::uint64_t>& layers,
    std::string* model_path) {
  auto created = single_model_runtime(dir, id, layers, model_path);
  if (!created) return created;
  if (auto r = (*created)->ensure_loaded(id, true).get(); !r) return std::move(r).error();
  return created;
}

phase_result merge_tallies(std::vector<phase_tally>& tallies,
                           std::chrono::steady_clock::time_point start, double seconds) {
  phase_result result;
  std::uint64_t calls = 0;
  auto end = start;
  for (auto& t : tallies) {
    calls += t.calls;
    end = std::max(end, t.end);
    result.failures += t.failures;
    result.missed = result.missed || t.missed;
    if (result.failure.empty()) result.failure = std::move(t.failure);
    result.latencies_us.insert(result.latencies_us.end(), t.latencies_us.begin(),
                               t.latencies_us.end());
  }
  double elapsed = end > start ? std::chrono::duration<double>(end - start).count() : seconds;
  result.rps = elapsed > 0 ? static_cast<double>(calls) / elapsed : 0;
  return result;
}

tensor random_input(std::uint64_t width, std::uint64_t seed) {
  std::vector<float> values(width);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (auto& v : values)
    v = uniform(rng);
  tensor t{"input", dtype::f32, {1, width}, {}};
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace warm::bench
