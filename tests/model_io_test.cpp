// check_outputs (warm/model_io.hpp): a model's answer against its declaration, for answers warm
// did not compute itself (a model runtime's, which may be hostile).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/code_helper.hpp"
#include "warm/model_io.hpp"

namespace {

warm::tensor f32(std::string name, std::vector<std::uint64_t> shape) {
  warm::tensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  std::uint64_t n = 4;
  for (auto d : t.shape)
    n *= d;
  t.data.resize(n);
  return t;
}

// Batched: y F32 [-1, 8] and z F32 [-1, -1, 2].
warm::model_io two_outputs() {
  warm::model_io io;
  io.batched = true;
  io.inputs = {{"x", warm::dtype::f32, {-1, 16}}};
  io.outputs = {{"y", warm::dtype::f32, {-1, 8}}, {"z", warm::dtype::f32, {-1, -1, 2}}};
  return io;
}

std::string refusal(const std::vector<warm::tensor>& outputs, const warm::model_io& io,
                    std::uint64_t batch) {
  auto checked = warm::check_outputs(outputs, io, batch);
  REQUIRE_FALSE(checked);
  CHECK(checked.error().code == warm::errc::internal);
  return checked.error().message;
}

}  // namespace

TEST_CASE("check_outputs passes outputs that match the declaration, dynamic dimensions any size") {
  auto io = two_outputs();
  CHECK(warm::check_outputs({f32("y", {2, 8}), f32("z", {2, 5, 2})}, io, 2));
  CHECK(warm::check_outputs({f32("y", {1, 8}), f32("z", {1, 0, 2})}, io, 1));
  // Names are the runtime's own: the order is what counts.
  CHECK(warm::check_outputs({f32("output0", {3, 8}), f32("", {3, 1, 2})}, io, 3));
}

TEST_CASE(
    "check_outputs refuses a count, dtype, rank or fixed dimension the model does not declare") {
  auto io = two_outputs();
  CHECK_THAT(refusal({f32("y", {2, 8})}, io, 2),
             Catch::Contains("1 output; the model declares 2 ('y', 'z')"));
  CHECK_THAT(refusal({f32("y", {2, 8}), f32("z", {2, 1, 2}), f32("w", {2})}, io, 2),
             Catch::Contains("3 outputs; the model declares 2"));
  CHECK(refusal({}, io, 2) == "0 outputs; the model declares 2 ('y', 'z')");

  auto wrong_type = f32("y", {2, 8});
  wrong_type.type = warm::dtype::i32;
  CHECK(refusal({wrong_type, f32("z", {2, 1, 2})}, io, 2) ==
        "output 'y' of I32; the model declares y F32 [-1, 8]");
  CHECK(refusal({f32("y", {2, 8, 1}), f32("z", {2, 1, 2})}, io, 2) ==
        "output 'y' of rank 3; the model declares y F32 [-1, 8]");
  CHECK(refusal({f32("y", {2, 8}), f32("z", {2, 1, 3})}, io, 2) ==
        "output 'z' of shape [2, 1, 3]; the model declares z F32 [-1, -1, 2]");
}

TEST_CASE("check_outputs holds a batched model's every output to the batch's rows") {
  auto io = two_outputs();
  CHECK(refusal({f32("y", {3, 8}), f32("z", {2, 1, 2})}, io, 2) ==
        "output 'y' of 3 rows for a batch of 2");
  CHECK(refusal({f32("y", {2, 8}), f32("z", {1, 1, 2})}, io, 2) ==
        "output 'z' of 1 row for a batch of 2");

  // Undeclared outputs pass whatever their dtype and shape, but not a wrong batch.
  warm::model_io unknown;
  unknown.batched = true;
  unknown.outputs = {{"out", warm::dtype::f32, {}, false}};
  auto any = f32("out", {4, 3, 3});
  any.type = warm::dtype::u8;
  any.data.resize(36);
  CHECK(warm::check_outputs({any}, unknown, 4));
  CHECK(refusal({any}, unknown, 2) == "output 'out' of 4 rows for a batch of 2");
  CHECK(refusal({f32("out", {})}, unknown, 2) ==
        "output 'out' without a batch dimension for a batch of 2");

  // Not batched: the first dimension is the model's own.
  warm::model_io single;
  single.outputs = {{"s", warm::dtype::f32, {-1}}};
  CHECK(warm::check_outputs({f32("s", {7})}, single, 1));
  // Nothing declared: any number of outputs, each with exactly its bytes.
  CHECK(warm::check_outputs({f32("a", {1}), f32("b", {2, 2})}, warm::model_io{}, 1));
}

TEST_CASE(
    "check_outputs refuses data that its shape does not hold, a shape whose bytes overflow "
    "included") {
  auto io = two_outputs();
  auto short_data = f32("y", {2, 8});
  short_data.data.pop_back();
  CHECK(refusal({short_data, f32("z", {2, 1, 2})}, io, 2) ==
        "output 'y' of 63 bytes; its shape [2, 8] of F32 needs 64");

  warm::model_io free_form;
  free_form.outputs = {{"huge", warm::dtype::f64, {-1}}};
  warm::tensor huge;
  huge.type = warm::dtype::f64;
  huge.shape = {std::uint64_t{1} << 61};  // x 8 bytes wraps to 0, which empty data would match
  CHECK_THAT(refusal({huge}, free_form, 1),
             Catch::Contains("of 0 bytes") && Catch::Contains("needs more than 2^62"));
}

// A code model's declaration comes from its describe helper, which ran the untrusted archive: its
// answer is untrusted input too. -1 is a dynamic dimension; anything below it is refused, never
// passed on as a declaration for check_outputs to hold answers to.
TEST_CASE("a describe helper's declaration with a dimension below -1 is refused") {
  auto answer = [](const std::string& dim) {
    return R"({"kind": "torchscript", "predicted_bytes": 64, "layers": 0, "activation": "", "io": )"
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, )" +
           dim +
           R"(], "known": true}], )"
           R"("outputs": [], "batched": false}})";
  };
  auto described = warm::description_from_json(answer("4"), "m.pt");
  REQUIRE(described);
  REQUIRE(described->io.inputs.size() == 1);
  CHECK(described->io.inputs[0].shape == std::vector<std::int64_t>{-1, 4});
  for (const char* dim : {"-2", "-9223372036854775808"}) {
    INFO(dim);
    auto refused = warm::description_from_json(answer(dim), "m.pt");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == warm::errc::invalid_argument);
    CHECK(refused.error().message ==
          "m.pt: the describe helper's answer gives tensor 'x' a negative dimension");
  }
}
