// Dense-model rules on top of a valid safetensors header.
#include <catch2/catch.hpp>

#include "support/test_files.hpp"
#include "warm/dense_model.hpp"
#include "warm/model_writer.hpp"

using nlohmann::json;
using warm::test::dense_header;
using warm::test::f32;
using warm::test::image;
using warm::test::json_image;

namespace {

warm::expected<warm::dense_spec> spec_of(const json& header, std::uint64_t data_bytes) {
  auto parsed = warm::parse_safetensors(json_image(header, data_bytes));
  if (!parsed) return parsed.error();
  return warm::dense_spec_from(*parsed);
}

std::uint64_t bytes_of(const std::vector<std::uint64_t>& w) {
  return warm::dense_data_bytes(w);
}

}  // namespace

TEST_CASE("a valid dense header yields the layer layout") {
  std::vector<std::uint64_t> widths{784, 512, 10};
  auto spec = spec_of(dense_header(widths, "tanh"), bytes_of(widths));
  REQUIRE(spec);
  CHECK(spec->activation == warm::activation::tanh);
  REQUIRE(spec->layers.size() == 2);
  CHECK(spec->input_width() == 784);
  CHECK(spec->output_width() == 10);
  CHECK(spec->widest() == 784);
  CHECK(spec->parameters() == 784 * 512 + 512 + 512 * 10 + 10);
  CHECK(spec->layers[0].weight_offset == 0);
  CHECK(spec->layers[0].bias_offset == 4 * 784 * 512);
  CHECK(spec->layers[1].weight_offset == 4 * (784 * 512 + 512));
  CHECK(spec->data_bytes == bytes_of(widths));
}

TEST_CASE("dense rules are enforced with specific errors") {
  std::vector<std::uint64_t> widths{4, 3, 2};
  const auto size = bytes_of(widths);
  auto with = [&](auto mutate) {
    json h = dense_header(widths);
    mutate(h);
    return h;
  };
  struct bad_case {
    const char* what;
    json header;
    std::uint64_t data_bytes;
    const char* error;
  };
  std::vector<bad_case> cases = {
      {"missing metadata", with([](json& h) { h.erase("__metadata__"); }), size,
       "no \"warm.kind\""},
      {"wrong kind", with([](json& h) { h["__metadata__"]["warm.kind"] = "conv"; }), size,
       "unsupported model kind 'conv'"},
      {"missing activation", with([](json& h) { h["__metadata__"].erase("warm.activation"); }),
       size, "no \"warm.activation\""},
      {"unknown activation", with([](json& h) { h["__metadata__"]["warm.activation"] = "swish"; }),
       size, "unknown activation 'swish'"},
      {"no layers", json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}}},
       0, "has no layers"},
      {"extra tensor", with([&](json& h) { h["extra"] = f32({1}, size); }), size + 4,
       "unexpected tensor 'extra'"},
      {"leading zero index", with([&](json& h) { h["layers.01.bias"] = f32({1}, size); }), size + 4,
       "unexpected tensor 'layers.01.bias'"},
      {"missing bias",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", f32({3, 4}, 0)}},
       48, "missing tensor 'layers.0.bias'"},
      {"missing weight (gap in layers)",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.1.weight", f32({3, 4}, 0)},
            {"layers.1.bias", f32({3}, 48)},
            {"layers.0.bias", f32({4}, 60)}},
       76, "missing tensor 'layers.0.weight'"},
      {"non-F32 dtype",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", {{"dtype", "F16"}, {"shape", {1, 1}}, {"data_offsets", {0, 2}}}},
            {"layers.0.bias", {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {2, 4}}}}},
       4, "dtype F16 is not supported"},
      {"weight wrong rank",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", f32({12}, 0)},
            {"layers.0.bias", f32({3}, 48)}},
       60, "weight must have shape [out, in]"},
      {"bias wrong size",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", f32({3, 4}, 0)},
            {"layers.0.bias", f32({2}, 48)}},
       56, "bias has 2 entries but the weight has 3 outputs"},
      {"zero dimension",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", f32({0, 4}, 0)},
            {"layers.0.bias", f32({0}, 0)}},
       0, "has a zero dimension"},
      {"layers do not chain",
       json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}},
            {"layers.0.weight", f32({3, 4}, 0)},
            {"layers.0.bias", f32({3}, 48)},
            {"layers.1.weight", f32({2, 5}, 60)},
            {"layers.1.bias", f32({2}, 100)}},
       108, "takes 5 inputs but layer 0 produces 3"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto spec = spec_of(c.header, c.data_bytes);
    REQUIRE_FALSE(spec);
    CHECK(spec.error().code == warm::errc::invalid_argument);
    CHECK_THAT(spec.error().message, Catch::Contains(c.error));
  }
}

// Widths are capped at max_dense_width (2^24): exactly the cap passes the width rule, one more
// is refused naming the cap, for inputs and outputs alike. The header is built directly (a file
// with a 2^24-wide layer holds 64 MiB of weights), so only the rule itself is under test.
TEST_CASE("a dense width of 2^24 passes the width rule; 2^24 + 1 is refused naming the limit") {
  auto header_with = [](std::uint64_t in, std::uint64_t out) {
    warm::safetensors_header h;
    h.metadata = {{"warm.kind", "dense"}, {"warm.activation", "relu"}};
    warm::tensor_info w{"layers.0.weight", warm::dtype::f32, {out, in}, 0, out * in * 4};
    warm::tensor_info b{"layers.0.bias", warm::dtype::f32, {out}, w.end, w.end + out * 4};
    h.data_bytes = b.end;
    h.tensors = {w, b};
    return h;
  };
  const std::uint64_t cap = warm::max_dense_width;
  REQUIRE(cap == (1u << 24));
  auto widest = warm::dense_spec_from(header_with(cap, 1));
  REQUIRE(widest);
  CHECK(widest->input_width() == cap);
  CHECK(warm::dense_spec_from(header_with(1, cap)));
  for (auto [in, out] :
       {std::pair<std::uint64_t, std::uint64_t>{cap + 1, 1}, {1, cap + 1}, {1ull << 40, 1}}) {
    INFO(in << " -> " << out);
    auto spec = warm::dense_spec_from(header_with(in, out));
    REQUIRE_FALSE(spec);
    CHECK(spec.error().code == warm::errc::invalid_argument);
    CHECK(spec.error().message == "layer 0: dimension exceeds 16777216");
  }
}

TEST_CASE("open_model_file prefixes errors with the path") {
  warm::test::temp_dir dir;
  auto path = dir / "m.safetensors";
  warm::test::write_file(
      path,
      json_image(json{{"__metadata__", {{"warm.kind", "dense"}, {"warm.activation", "relu"}}}}, 0));
  auto model = warm::open_model_file(path);
  REQUIRE_FALSE(model);
  CHECK_THAT(model.error().message, Catch::StartsWith(path + ": ") && Catch::Contains("no layers"));
}
