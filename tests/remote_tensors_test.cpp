// The model-runtime interface's conversions (src/remote/tensors): tensors and specs as a hostile
// runtime may send them, read without overflow and within bounds.
#include <catch2/catch.hpp>

#include <capnp/message.h>

#include <cstdint>
#include <string>
#include <vector>

#include "remote/tensors.hpp"

namespace {

// Reads the tensor a runtime would send as `dtype`, `shape` and `bytes` of data.
warm::expected<warm::tensor> read(const std::string& dtype, const std::vector<std::uint64_t>& shape,
                                  std::size_t bytes) {
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<warm::remote::Tensor>();
  t.setName("y");
  t.setDtype(dtype);
  auto s = t.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i)
    s.set(i, shape[i]);
  t.initData(static_cast<unsigned>(bytes));
  return warm::read_tensor(t.asReader());
}

std::string refusal(const warm::expected<warm::tensor>& read) {
  REQUIRE_FALSE(read);
  CHECK(read.error().code == warm::errc::invalid_argument);
  return read.error().message;
}

}  // namespace

TEST_CASE("a tensor whose data matches its shape is read as it was written") {
  auto t = read("F32", {2, 3}, 24);
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::uint64_t>{2, 3});
  CHECK(t->type == warm::dtype::f32);
  CHECK(t->data.size() == 24);
  auto empty = read("I64", {4, 0, 5}, 0);
  REQUIRE(empty);
  CHECK(empty->shape == std::vector<std::uint64_t>{4, 0, 5});
  CHECK(refusal(read("F32", {2, 3}, 23)) ==
        "tensor 'y': 23 bytes do not match its shape [2, 3] of F32");
}

TEST_CASE("a tensor with more data than its shape holds is refused, not cut to its shape") {
  CHECK(refusal(read("F32", {2, 3}, 25)) ==
        "tensor 'y': 25 bytes do not match its shape [2, 3] of F32");
  CHECK(refusal(read("I64", {4, 0, 5}, 8)) ==
        "tensor 'y': 8 bytes do not match its shape [4, 0, 5] of I64");
  CHECK(refusal(read("U8", {}, 2)) ==
        "tensor 'y': 2 bytes do not match its shape [] of U8");  // a scalar is 1 byte
}

TEST_CASE("a shape whose byte count overflows is refused, never wrapped to what the data holds") {
  // 2^61 x 8 bytes is 2^64: wrapped, 0, which empty data would match.
  CHECK(refusal(read("F64", {std::uint64_t{1} << 61}, 0)) ==
        "tensor 'y': shape [2305843009213693952] of F64 is too large");
  // 2^32 x 2^32: the element count wraps to 0.
  CHECK_THAT(refusal(read("U8", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, 0)),
             Catch::Contains("too large"));
  // A 0 dimension would hide the others: [0, 2^63] holds no bytes, but is no shape to pass on.
  CHECK_THAT(refusal(read("F32", {0, std::uint64_t{1} << 63}, 0)), Catch::Contains("too large"));
  CHECK_THAT(refusal(read("BOOL", {UINT64_MAX}, 0)), Catch::Contains("too large"));
  // Just within the bound: refused for its data alone.
  CHECK_THAT(refusal(read("U8", {std::uint64_t{1} << 62}, 0)),
             Catch::Contains("0 bytes do not match"));
}

TEST_CASE("a tensor or spec of more than 32 dimensions is refused") {
  CHECK(read("F32", std::vector<std::uint64_t>(32, 1), 4));
  CHECK(refusal(read("F32", std::vector<std::uint64_t>(33, 1), 4)) ==
        "tensor 'y': rank 33, more than 32");

  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<warm::remote::TensorSpec>();
  spec.setName("x");
  spec.setDtype("F32");
  spec.initShape(33);
  auto refused = warm::read_spec(spec.asReader());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message == "tensor 'x': rank 33, more than 32");
  spec.initShape(2);
  CHECK(warm::read_spec(spec.asReader()));
}

TEST_CASE("names and dtypes from the other side are cut short in messages") {
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<warm::remote::Tensor>();
  t.setName(std::string(100000, 'n'));
  t.setDtype(std::string(100000, 'd'));
  auto refused = warm::read_tensor(t.asReader());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.size() < 200);
}
