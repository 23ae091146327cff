// grpc_front::check_wire on encoded KServe V2 requests: the entries per repeated field and their
// boundary, the entries in all, the decoded-size estimate (packed varints counted one by one),
// unknown fields, depth, malformed encodings, and the request that took warmd to 7 GB.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <catch2/catch.hpp>
#include <string>

#include "grpc/wire_bounds.hpp"
#include "kserve_v2.pb.h"

using warm::grpc_front::check_wire;
using warm::grpc_front::wire_limits;
namespace pb = ::inference;

namespace {

// check_wire over `bytes` as a ModelInferRequest; the error message, or "" when it fits.
std::string refusal(const std::string& bytes, const wire_limits& limits) {
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  auto r = check_wire(in, bytes.size(), *pb::ModelInferRequest::descriptor(), limits);
  return r ? "" : r.error().message;
}

std::string encoded(const pb::ModelInferRequest& request) {
  std::string bytes;
  REQUIRE(request.SerializeToString(&bytes));
  return bytes;
}

pb::ModelInferRequest with_inputs(int n) {
  pb::ModelInferRequest r;
  r.set_model_name("m");
  for (int i = 0; i < n; ++i)
    r.add_inputs()->set_name("in" + std::to_string(i));
  return r;
}

}  // namespace

TEST_CASE("a real request passes and costs what it holds") {
  pb::ModelInferRequest r;
  r.set_model_name("small");
  auto* a = r.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(2);
  a->add_shape(8);
  for (int i = 0; i < 16; ++i)
    a->mutable_contents()->add_fp32_contents(0.5f * i);
  (*a->mutable_parameters())["binary_data"].set_bool_param(true);
  auto* b = r.add_inputs();
  b->set_name("b");
  b->set_datatype("INT64");
  r.add_raw_input_contents(std::string(64, 'x'));
  r.add_outputs()->set_name("output");
  CHECK(refusal(encoded(r), {}) == "");
}

TEST_CASE("entries of one repeated field: the limit is accepted, one more is refused") {
  wire_limits limits;
  limits.max_repeated = 1024;
  CHECK(refusal(encoded(with_inputs(1024)), limits) == "");
  CHECK_THAT(refusal(encoded(with_inputs(1025)), limits),
             Catch::Contains("field 'inputs' has more than 1024 entries"));
  // Counted per field: 1024 inputs and 1024 outputs are each within the limit.
  auto r = with_inputs(1024);
  for (int i = 0; i < 1024; ++i)
    r.add_outputs()->set_name("o");
  CHECK(refusal(encoded(r), limits) == "");
  // Map entries are entries of the map's field.
  pb::ModelInferRequest p;
  for (int i = 0; i <= 1024; ++i)
    (*p.mutable_parameters())["k" + std::to_string(i)].set_int64_param(i);
  CHECK_THAT(refusal(encoded(p), limits), Catch::Contains("field 'parameters' has more than 1024"));
}

TEST_CASE("entries in all, across fields and nested messages") {
  wire_limits limits;
  limits.max_objects = 101;
  // The model's name, then each input a message and its name: 1 + 2n entries.
  CHECK(refusal(encoded(with_inputs(50)), limits) == "");  // 101
  CHECK_THAT(refusal(encoded(with_inputs(51)), limits),
             Catch::Contains("more than 101 entries in all"));
}

TEST_CASE("the attack: empty inputs, two bytes each, are refused before anything is parsed") {
  std::string bytes;
  for (int i = 0; i < (1 << 20); ++i)
    bytes += std::string("\x2a\x00", 2);  // inputs {} x 1M
  CHECK_THAT(refusal(bytes, {}), Catch::Contains("field 'inputs' has more than 1024 entries"));
  wire_limits wide;
  wide.max_repeated = 1 << 30;
  wide.max_objects = std::uint64_t{1} << 40;
  // Even with the counts lifted, the decoded size is: 128 bytes per 2 on the wire.
  CHECK_THAT(refusal(bytes, wide), Catch::Contains("would take more than"));
}

TEST_CASE("the decoded size: packed varints are counted, fixed widths divided") {
  pb::ModelInferRequest r;
  auto* in = r.add_inputs();
  for (int i = 0; i < 1000; ++i)
    in->mutable_contents()->add_int64_contents(i % 100);  // 1 byte each
  const auto bytes = encoded(r);
  // 1000 int64 elements take 8000 bytes; one message and its contents message 256 more.
  wire_limits limits;
  limits.max_parsed_bytes = 8000 + 2 * 128;
  CHECK(refusal(bytes, limits) == "");
  limits.max_parsed_bytes -= 1;
  CHECK_THAT(refusal(bytes, limits), Catch::Contains("field 'int64_contents'"));

  pb::ModelInferRequest f;
  auto* fin = f.add_inputs();
  for (int i = 0; i < 1000; ++i)
    fin->mutable_contents()->add_fp32_contents(1.5f);
  limits.max_parsed_bytes = 4000 + 2 * 128;
  CHECK(refusal(encoded(f), limits) == "");
  limits.max_parsed_bytes -= 1;
  CHECK_THAT(refusal(encoded(f), limits), Catch::Contains("field 'fp32_contents'"));
}

TEST_CASE("unknown fields are entries too") {
  std::string bytes;
  for (int i = 0; i < 200; ++i)
    bytes += std::string("\xf8\x01\x01", 3);  // field 31, varint 1
  wire_limits limits;
  limits.max_objects = 199;
  CHECK_THAT(refusal(bytes, limits), Catch::Contains("more than 199 entries"));
  limits.max_objects = 200;
  CHECK(refusal(bytes, limits) == "");
}

TEST_CASE("nesting deeper than the limit is refused") {
  pb::ModelInferRequest r;
  (*r.add_inputs()->mutable_parameters())["k"].set_bool_param(
      true);  // request > input > entry > value
  wire_limits limits;
  limits.max_depth = 3;
  CHECK(refusal(encoded(r), limits) == "");
  limits.max_depth = 2;
  CHECK_THAT(refusal(encoded(r), limits), Catch::Contains("deeper than 2"));
}

TEST_CASE("malformed encodings are refused, never read past") {
  const auto whole = encoded(with_inputs(3));
  for (std::size_t n = 1; n < whole.size(); ++n) {
    auto cut = refusal(whole.substr(0, n), {});
    // Some prefixes end on a field boundary and are whole messages themselves.
    pb::ModelInferRequest parsed;
    if (!parsed.ParseFromString(whole.substr(0, n))) CHECK(cut != "");
  }
  CHECK_THAT(refusal(std::string("\x2d\x00\x00\x00\x00", 5), {}),
             Catch::Contains("wrong wire type"));  // inputs as fixed32
  CHECK_THAT(refusal(std::string("\x2b", 1), {}), Catch::Contains("group"));
  CHECK_THAT(refusal(std::string("\x2a\x7f", 2), {}),
             Catch::Contains("truncated"));  // 127 bytes promised
}
