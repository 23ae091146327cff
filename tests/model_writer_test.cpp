// The dense model writer: valid, deterministic, streaming to disk.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "support/test_files.hpp"
#include "warm/dense_model.hpp"
#include "warm/model_writer.hpp"

TEST_CASE("written models are valid and deterministic per seed") {
  warm::test::temp_dir dir;
  warm::dense_model_options options{{32, 16, 8}, warm::activation::gelu, 42};
  REQUIRE(warm::write_dense_model(dir / "a/1/model.safetensors", options));
  auto model = warm::open_model_file(dir / "a/1/model.safetensors");
  REQUIRE(model);
  CHECK(model->spec.activation == warm::activation::gelu);
  CHECK(model->spec.data_bytes == warm::dense_data_bytes({32, 16, 8}));

  std::ifstream in(dir / "a/1/model.safetensors", std::ios::binary);
  std::stringstream file;
  file << in.rdbuf();
  auto image = warm::dense_model_bytes(options);
  REQUIRE(image);
  CHECK(file.str() == *image);  // the streamed file equals the in-memory image

  options.seed = 43;
  auto other = warm::dense_model_bytes(options);
  REQUIRE(other);
  CHECK(*other != *image);
  CHECK(other->size() == image->size());
}

TEST_CASE("weights follow nn.Linear's uniform(-1/sqrt(in), 1/sqrt(in))") {
  auto image = warm::dense_model_bytes({{100, 50}, warm::activation::none, 9});
  REQUIRE(image);
  auto header = warm::parse_safetensors(*image);
  REQUIRE(header);
  const auto* data = reinterpret_cast<const float*>(image->data() + header->data_offset);
  std::size_t count = header->data_bytes / 4;
  float lo = 1, hi = -1;
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    lo = std::min(lo, data[i]);
    hi = std::max(hi, data[i]);
    sum += data[i];
  }
  CHECK(lo >= -0.1f);
  CHECK(hi <= 0.1f);
  CHECK(hi - lo > 0.19f);                // spans the range
  CHECK(std::abs(sum / count) < 0.005);  // centred
}

TEST_CASE("bad writer options and widths are refused") {
  CHECK_FALSE(warm::dense_model_bytes({{10}, warm::activation::relu, 1}));
  CHECK_FALSE(warm::dense_model_bytes({{10, 0}, warm::activation::relu, 1}));
  CHECK(warm::parse_widths("784,512,10").value() == std::vector<std::uint64_t>{784, 512, 10});
  for (const char* bad : {"", "5", "1,,2", "1,x", "-1,2", "3,0", "1,2,", "99999999999,1"}) {
    INFO(bad);
    CHECK_FALSE(warm::parse_widths(bad));
  }
}

TEST_CASE("widths_for_bytes sizes a model near the request") {
  for (std::uint64_t target :
       {std::uint64_t{1} << 20, std::uint64_t{64} << 20, std::uint64_t{1} << 30}) {
    auto bytes = warm::dense_data_bytes(warm::widths_for_bytes(target));
    CHECK(bytes <= target);
    CHECK(bytes > target - target / 100);
  }
}
