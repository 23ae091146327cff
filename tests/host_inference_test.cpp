// Host inference against a double-precision reference computed here from the file's own bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

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

}  // namespace

TEST_CASE("host inference matches a double-precision reference") {
  warm::test::temp_dir dir;
  auto dev =
      warm::make_device(warm::device_spec{warm::device_spec::kind::host, 0, 64ull << 20}).value();
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-2, 2);
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
        std::vector<float> input(batch * widths.front());
        for (auto& v : input)
          v = uniform(rng);
        std::vector<float> output;
        REQUIRE(dev->infer(**resident, input.data(), input.size(), batch, output));
        auto expected = reference(model->spec, data, input, batch);
        REQUIRE(output.size() == expected.size());
        double worst = 0;
        for (std::size_t i = 0; i < output.size(); ++i) {
          double err = std::abs(output[i] - expected[i]) / std::max(1.0, std::abs(expected[i]));
          worst = std::max(worst, err);
        }
        CHECK(worst <= 1e-5);
      }
    }
  }
  CHECK(dev->used() == 0);
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
