#include <algorithm>
#include <cstring>
#include <random>

#include "benches.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace warm::bench {

expected<std::unique_ptr<runtime>> single_model_runtime(const scratch_dir& dir, const std::string& id,
                                                       const std::vector<std::uint64_t>& layers,
                                                       std::string* model_path) {
  auto path = (dir.path() / "repo" / id / "1" / model_file_name).string();
  if (auto r = write_dense_model(path, {layers, activation::relu, 1}); !r) return std::move(r).error();
  if (model_path) *model_path = path;
  runtime_options options;
  auto bytes = dense_data_bytes(layers);
  options.devices = {"host:" + std::to_string(std::max<std::uint64_t>(std::uint64_t{1} << 30, 2 * bytes))};
  options.repositories = {(dir.path() / "repo").string()};
  options.state_dir = (dir.path() / "state").string();
  auto created = runtime::create(options);
  if (!created) return created;
  if (auto r = (*created)->register_model(id, {id}).get(); !r) return std::move(r).error();
  return created;
}

tensor random_input(std::uint64_t width, std::uint64_t seed) {
  std::vector<float> values(width);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (auto& v : values) v = uniform(rng);
  tensor t{"input", dtype::f32, {1, width}, {}};
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace warm::bench
