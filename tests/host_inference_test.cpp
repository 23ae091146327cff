// Host inference against a double-precision reference computed here from the file's own bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "gpu/host_device.hpp"
#include "support/test_files.hpp"
#include "warm/device.hpp"
#include "warm/model_writer.hpp"

namespace {

double reference_activation(warm::activation act, double x) {
  switch (act) {
    case warm::activation::relu:
      return x > 0 ? x : 0;
    case warm::activation::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case warm::activation::tanh:
      return std::tanh(x);
    case warm::activation::none:
      return x;
  }
  return x;
}

// out[b, :] = layers applied to in[b, :], in double precision, reading weights from `data`.
std::vector<double> reference(const warm::dense_spec& spec, const char* data,
                              const std::vector<float>& input, std::uint64_t batch) {
  std::vector<double> x(input.begin(), input.end());
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const auto& l = spec.layers[i];
    const auto* w = reinterpret_cast<const float*>(data + l.weight_offset);
    const auto* b = reinterpret_cast<const float*>(data + l.bias_offset);
    std::vector<double> y(batch * l.out);
    for (std::uint64_t r = 0; r < batch; ++r)
      for (std::uint64_t o = 0; o < l.out; ++o) {
        double sum = b[o];
        for (std::uint64_t k = 0; k < l.in; ++k)
          sum += static_cast<double>(w[o * l.in + k]) * x[r * l.in + k];
        y[r * l.out + o] =
            i + 1 == spec.layers.size() ? sum : reference_activation(spec.activation, sum);
      }
    x = std::move(y);
  }
  return x;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The largest relative error (against max(1, |expected|)) of `batch` random rows run on `dev`.
double worst_error(warm::device& dev, const warm::dense_resident& resident,
                   const warm::dense_spec& spec, const char* data, std::uint64_t batch,
                   std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-2, 2);
  std::vector<float> input(batch * spec.layers.front().in);
  for (auto& v : input)
    v = uniform(rng);
  std::vector<float> output;
  REQUIRE(dev.infer(resident, input.data(), input.size(), batch, output));
  auto expected = reference(spec, data, input, batch);
  REQUIRE(output.size() == expected.size());
  double worst = 0;
  for (std::size_t i = 0; i < output.size(); ++i)
    worst =
        std::max(worst, std::abs(output[i] - expected[i]) / std::max(1.0, std::abs(expected[i])));
  return worst;
}

}  // namespace

TEST_CASE("host inference matches a double-precision reference") {
  warm::test::temp_dir dir;
  auto dev =
      warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 64ull << 20}).value();
  std::mt19937 rng(1234);
  const std::vector<std::vector<std::uint64_t>> shapes{
      {1, 1}, {8, 3}, {64, 32, 10}, {100, 257, 33, 7}, {256, 256}, {17, 128, 128, 128, 5}};
  int model_index = 0;
  for (const auto& widths : shapes) {
    for (auto act : {warm::activation::relu, warm::activation::gelu, warm::activation::tanh,
                     warm::activation::none}) {
      auto path = dir / ("m" + std::to_string(model_index++) + ".safetensors");
      REQUIRE(
          warm::write_dense_model(path, {widths, act, static_cast<std::uint64_t>(model_index)}));
      auto model = warm::open_model_file(path);
      REQUIRE(model);
      auto resident = dev->load(*model);
      REQUIRE(resident);
      auto file = slurp(path);
      const char* data = file.data() + model->header.data_offset;
      // 9, 15 and 33 are padded to a multiple of four rows for the sgemm.
      for (std::uint64_t batch : {1, 2, 5, 9, 15, 16, 33, 64}) {
        INFO("model " << path << " batch " << batch);
        CHECK(worst_error(*dev, **resident, model->spec, data, batch, rng) <= 1e-5);
      }
    }
  }
  CHECK(dev->used() == 0);
}

TEST_CASE("a batch runs row by row or as one padded sgemm, layer by layer") {
  // Layers that stay in the caches run up to 6 rows one sgemv each, larger layers up to 3; every
  // sgemm runs on the batch padded to a multiple of four rows.
  CHECK(warm::host_row_by_row_limit(std::uint64_t{8} << 20) == 6);
  CHECK(warm::host_row_by_row_limit((std::uint64_t{8} << 20) + 1) == 3);
  CHECK(warm::host_padded_rows(1) == 4);
  CHECK(warm::host_padded_rows(8) == 8);
  CHECK(warm::host_padded_rows(9) == 12);

  // 64 -> 2304 -> 1024 -> 8: the 9 MiB middle layer runs as an sgemm from 4 rows while the
  // small layers either side still run row by row (up to 6), so a padded sgemm takes its input
  // from a row-by-row layer and hands its output to one that writes the caller's rows.
  warm::test::temp_dir dir;
  auto path = dir / "mixed.safetensors";
  const std::vector<std::uint64_t> widths{64, 2304, 1024, 8};
  REQUIRE(warm::write_dense_model(path, {widths, warm::activation::relu, 7}));
  auto model = warm::open_model_file(path);
  REQUIRE(model);
  REQUIRE(model->spec.layers[1].in * model->spec.layers[1].out * sizeof(float) >
          (std::uint64_t{8} << 20));
  auto dev =
      warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 64ull << 20}).value();
  auto resident = dev->load(*model);
  REQUIRE(resident);
  auto file = slurp(path);
  const char* data = file.data() + model->header.data_offset;
  std::mt19937 rng(99);
  for (std::uint64_t batch = 1; batch <= 9; ++batch) {
    INFO("batch " << batch);
    CHECK(worst_error(*dev, **resident, model->spec, data, batch, rng) <= 1e-5);
  }
}

TEST_CASE("inference rejects wrong input sizes, batches and foreign models") {
  warm::test::temp_dir dir;
  auto path = dir / "m.safetensors";
  REQUIRE(warm::write_dense_model(path, {{8, 4}, warm::activation::relu, 1}));
  auto model = warm::open_model_file(path).value();
  auto dev =
      warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 1 << 20}).value();
  auto other =
      warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 1 << 20}).value();
  auto resident = dev->load(model).value();
  std::vector<float> input(16, 0.5f), output;

  auto wrong_size = dev->infer(*resident, input.data(), 15, 2, output);
  REQUIRE_FALSE(wrong_size);
  CHECK(wrong_size.error().code == warm::errc::invalid_argument);
  CHECK_THAT(wrong_size.error().message, Catch::Contains("expected [2, 8]"));

  auto zero = dev->infer(*resident, input.data(), 0, 0, output);
  REQUIRE_FALSE(zero);
  CHECK_THAT(zero.error().message, Catch::Contains("at least 1"));

  auto huge = dev->infer(*resident, input.data(), 16, std::uint64_t{1} << 40, output);
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Catch::Contains("too large"));

  auto foreign = other->infer(*resident, input.data(), 16, 2, output);
  REQUIRE_FALSE(foreign);
  CHECK_THAT(foreign.error().message, Catch::Contains("resident on"));

  REQUIRE(dev->infer(*resident, input.data(), 16, 2, output));
  CHECK(output.size() == 8);
}
