// warm-mmesh's translation rules (tools/warm-mmesh/v2_tensors, status_map): V2 datatype names to
// warm's, a model's inputs and outputs from V2 metadata (the batched rule, BYTES refused, bounds),
// inference requests, answers read from raw and from typed contents as a hostile runtime may send
// them, and gRPC statuses to warm's error codes.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kserve_v2.pb.h"
#include "status_map.hpp"
#include "v2_tensors.hpp"
#include "warm/safetensors.hpp"

using namespace warm;
using namespace warm::mmesh;
namespace pb = ::inference;

namespace {

void add_spec(google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata>* side,
              const std::string& name, const std::string& datatype,
              const std::vector<std::int64_t>& shape) {
  auto* t = side->Add();
  t->set_name(name);
  t->set_datatype(datatype);
  for (auto d : shape)
    t->add_shape(d);
}

pb::ModelMetadataResponse metadata(std::vector<std::int64_t> in_shape,
                                   std::vector<std::int64_t> out_shape,
                                   const std::string& in_type = "FP32") {
  pb::ModelMetadataResponse m;
  add_spec(m.mutable_inputs(), "x", in_type, in_shape);
  add_spec(m.mutable_outputs(), "y", "FP64", out_shape);
  return m;
}

pb::ModelInferResponse::InferOutputTensor* add_output(pb::ModelInferResponse& r,
                                                      const std::string& name,
                                                      const std::string& datatype,
                                                      const std::vector<std::int64_t>& shape) {
  auto* o = r.add_outputs();
  o->set_name(name);
  o->set_datatype(datatype);
  for (auto d : shape)
    o->add_shape(d);
  return o;
}

template <typename T>
std::vector<T> values_of(const tensor& t) {
  REQUIRE(t.data.size() % sizeof(T) == 0);
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

}  // namespace

TEST_CASE("V2 datatype names map to warm's dtypes and back", "[mmesh]") {
  const std::pair<const char*, const char*> names[] = {
      {"FP32", "F32"},   {"FP64", "F64"},   {"FP16", "F16"}, {"BF16", "BF16"}, {"INT64", "I64"},
      {"INT32", "I32"},  {"INT16", "I16"},  {"INT8", "I8"},  {"UINT8", "U8"},  {"UINT16", "U16"},
      {"UINT32", "U32"}, {"UINT64", "U64"}, {"BOOL", "BOOL"}};
  for (auto [v2, ours] : names) {
    auto type = dtype_from_v2(v2);
    REQUIRE(type);
    CHECK(to_string(*type) == ours);
    CHECK(dtype_to_v2(*type) == v2);
  }
  CHECK_FALSE(dtype_from_v2("BYTES"));
  CHECK_FALSE(dtype_from_v2("fp32"));
  CHECK_FALSE(dtype_from_v2(""));
  CHECK(dtype_to_v2(dtype::f8_e4m3).empty());
}

TEST_CASE("metadata becomes the model's inputs and outputs; batched when every first dim is -1",
          "[mmesh]") {
  auto io = io_from_metadata("m", metadata({-1, 4}, {-1}));
  REQUIRE(io);
  CHECK(io->batched);
  REQUIRE(io->inputs.size() == 1);
  CHECK(io->inputs[0].name == "x");
  CHECK(io->inputs[0].type == dtype::f32);
  CHECK(io->inputs[0].shape == std::vector<std::int64_t>{-1, 4});
  CHECK(io->outputs[0].type == dtype::f64);
  CHECK(io->outputs[0].shape == std::vector<std::int64_t>{-1});

  CHECK_FALSE(io_from_metadata("m", metadata({2, 4}, {-1}))->batched);
  CHECK_FALSE(io_from_metadata("m", metadata({-1, 4}, {3}))->batched);
  CHECK_FALSE(io_from_metadata("m", metadata({-1, 4}, {}))->batched);  // rank 0: no batch
  auto two = metadata({-1, 4}, {-1, -1});
  add_spec(two.mutable_inputs(), "z", "INT64", {5});
  CHECK_FALSE(io_from_metadata("m", two)->batched);
}

TEST_CASE("metadata warm cannot use is refused with the tensor named", "[mmesh]") {
  auto bytes = io_from_metadata("m", metadata({-1}, {-1}, "BYTES"));
  REQUIRE_FALSE(bytes);
  CHECK(bytes.error().code == errc::invalid_argument);
  CHECK(bytes.error().message ==
        "m: the runtime declares input 'x' as BYTES, which warm does not carry");

  pb::ModelMetadataResponse none;
  add_spec(none.mutable_outputs(), "y", "FP32", {-1});
  auto no_inputs = io_from_metadata("m", none);
  REQUIRE_FALSE(no_inputs);
  CHECK(no_inputs.error().message == "m: the runtime declares no inputs");

  pb::ModelMetadataResponse no_out;
  add_spec(no_out.mutable_inputs(), "x", "FP32", {-1});
  CHECK_FALSE(io_from_metadata("m", no_out));

  CHECK_FALSE(io_from_metadata("m", metadata({-1, -2}, {-1})));  // dimension below -1
  CHECK_FALSE(io_from_metadata("m", metadata(std::vector<std::int64_t>(17, 1), {-1})));  // rank
  CHECK(io_from_metadata("m", metadata(std::vector<std::int64_t>(16, 1), {-1})));

  auto dup = metadata({-1}, {-1});
  add_spec(dup.mutable_inputs(), "x", "FP32", {-1});
  CHECK_FALSE(io_from_metadata("m", dup));

  auto long_name = metadata({-1}, {-1});
  long_name.mutable_inputs(0)->set_name(std::string(257, 'a'));
  CHECK_FALSE(io_from_metadata("m", long_name));
  long_name.mutable_inputs(0)->set_name(std::string(256, 'a'));
  CHECK(io_from_metadata("m", long_name));

  auto many = metadata({-1}, {-1});
  for (int i = 0; i < 1024; ++i)
    add_spec(many.mutable_outputs(), "o" + std::to_string(i), "FP32", {-1});
  CHECK_FALSE(io_from_metadata("m", many));  // 1025 outputs
}

TEST_CASE("an inference request carries raw inputs with V2 names", "[mmesh]") {
  tensor x;
  x.name = "x";
  x.type = dtype::i64;
  x.shape = {2, 1};
  x.data.resize(16, std::byte{7});
  std::vector<tensor> inputs{x};
  pb::ModelInferRequest request;
  REQUIRE(fill_infer_request("m#1", std::move(inputs), request));
  CHECK(request.model_name() == "m#1");
  REQUIRE(request.inputs_size() == 1);
  CHECK(request.inputs(0).datatype() == "INT64");
  CHECK(request.inputs(0).shape_size() == 2);
  CHECK(request.outputs_size() == 0);
  REQUIRE(request.raw_input_contents_size() == 1);
  CHECK(request.raw_input_contents(0).size() == 16);

  tensor f8 = x;
  f8.type = dtype::f8_e4m3;
  std::vector<tensor> bad{f8};
  pb::ModelInferRequest refused;
  auto r = fill_infer_request("m#1", std::move(bad), refused);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_argument);
}

TEST_CASE("outputs are read from raw contents, checked against their shapes", "[mmesh]") {
  pb::ModelInferResponse r;
  add_output(r, "y", "FP32", {2, 2});
  add_output(r, "k", "INT64", {2});
  std::vector<float> y{1, 2, 3, 4};
  std::vector<std::int64_t> k{5, 6};
  r.add_raw_output_contents(std::string(reinterpret_cast<char*>(y.data()), 16));
  r.add_raw_output_contents(std::string(reinterpret_cast<char*>(k.data()), 16));
  auto out = read_infer_response("m", r);
  REQUIRE(out);
  REQUIRE(out->size() == 2);
  CHECK((*out)[0].shape == std::vector<std::uint64_t>{2, 2});
  CHECK(values_of<float>((*out)[0]) == y);
  CHECK(values_of<std::int64_t>((*out)[1]) == k);

  auto short_raw = r;
  short_raw.mutable_raw_output_contents(1)->resize(15);
  auto bad = read_infer_response("m", short_raw);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::internal);
  CHECK(bad.error().message ==
        "m: the runtime answered output 'k' of 15 bytes where its shape makes 16");

  auto missing = r;
  missing.mutable_raw_output_contents()->RemoveLast();
  CHECK_FALSE(read_infer_response("m", missing));  // raw contents for some outputs only
}

TEST_CASE("outputs are read from typed contents (as MLServer answers)", "[mmesh]") {
  pb::ModelInferResponse r;
  auto* y = add_output(r, "y", "FP64", {3});
  for (double v : {0.5, 1.5, 2.5})
    y->mutable_contents()->add_fp64_contents(v);
  auto* c = add_output(r, "c", "INT8", {2});
  c->mutable_contents()->add_int_contents(-128);
  c->mutable_contents()->add_int_contents(127);
  auto* u = add_output(r, "u", "UINT16", {1});
  u->mutable_contents()->add_uint_contents(65535);
  auto* b = add_output(r, "b", "BOOL", {2});
  b->mutable_contents()->add_bool_contents(true);
  b->mutable_contents()->add_bool_contents(false);
  auto* l = add_output(r, "l", "INT64", {1, 1});
  l->mutable_contents()->add_int64_contents(-9);
  auto* f = add_output(r, "f", "FP32", {1});
  f->mutable_contents()->add_fp32_contents(0.25f);
  auto* e = add_output(r, "e", "FP16", {0});  // empty: nothing to carry
  (void)e;
  auto out = read_infer_response("m", r);
  REQUIRE(out);
  REQUIRE(out->size() == 7);
  CHECK(values_of<double>((*out)[0]) == std::vector<double>{0.5, 1.5, 2.5});
  CHECK(values_of<std::int8_t>((*out)[1]) == std::vector<std::int8_t>{-128, 127});
  CHECK(values_of<std::uint16_t>((*out)[2]) == std::vector<std::uint16_t>{65535});
  CHECK(values_of<std::uint8_t>((*out)[3]) == std::vector<std::uint8_t>{1, 0});
  CHECK(values_of<std::int64_t>((*out)[4]) == std::vector<std::int64_t>{-9});
  CHECK(values_of<float>((*out)[5]) == std::vector<float>{0.25f});
  CHECK((*out)[6].data.empty());

  SECTION("a count that does not match the shape") {
    r.mutable_outputs(0)->mutable_contents()->add_fp64_contents(9);
    auto bad = read_infer_response("m", r);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "m: the runtime answered output 'y' with 4 values for 3 elements");
  }
  SECTION("a value out of its datatype's range") {
    r.mutable_outputs(1)->mutable_contents()->set_int_contents(0, 128);
    CHECK_FALSE(read_infer_response("m", r));
  }
  SECTION("values in another type's field") {
    r.mutable_outputs(0)->set_datatype("FP32");  // its values are in fp64_contents
    CHECK_FALSE(read_infer_response("m", r));
  }
  SECTION("FP16 values without raw contents") {
    r.mutable_outputs(6)->set_shape(0, 1);
    CHECK_FALSE(read_infer_response("m", r));
  }
}

TEST_CASE("a hostile answer is an internal error, never a crash", "[mmesh]") {
  auto one = [](const std::string& datatype, std::vector<std::int64_t> shape) {
    pb::ModelInferResponse r;
    add_output(r, "y", datatype, shape);
    return read_infer_response("m", r);
  };
  CHECK(one("FP32", {0}));
  CHECK_FALSE(one("BYTES", {1}));
  CHECK_FALSE(one("STRING", {1}));
  CHECK_FALSE(one("FP32", {-1}));
  CHECK_FALSE(one("FP32", {INT64_MAX, INT64_MAX}));       // overflow
  CHECK_FALSE(one("FP32", {1 << 20, 1 << 20, 1 << 20}));  // past max_tensor_bytes
  CHECK_FALSE(one("FP32", {0, INT64_MAX, 4}));            // a 0 dimension hides no overflow
  CHECK_FALSE(one("FP32", std::vector<std::int64_t>(17, 1)));
  CHECK_FALSE(one("FP32", {}));  // a scalar with no value given is one value missing
  pb::ModelInferResponse bad_name;
  add_output(bad_name, "", "FP32", {0});
  CHECK_FALSE(read_infer_response("m", bad_name));
  pb::ModelInferResponse many;
  for (int i = 0; i < 1025; ++i)
    add_output(many, "y" + std::to_string(i), "FP32", {0});
  auto too_many = read_infer_response("m", many);
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().code == errc::internal);
}

TEST_CASE("gRPC statuses map to warm's error codes", "[mmesh]") {
  using grpc::StatusCode;
  auto code = [](StatusCode c, call_kind k) {
    return error_from_status(c, "why", "m", "loadModel failed:", k).code;
  };
  CHECK(code(StatusCode::INVALID_ARGUMENT, call_kind::load) == errc::invalid_argument);
  CHECK(code(StatusCode::FAILED_PRECONDITION, call_kind::load) == errc::invalid_argument);
  CHECK(code(StatusCode::NOT_FOUND, call_kind::infer) == errc::not_found);
  CHECK(code(StatusCode::RESOURCE_EXHAUSTED, call_kind::load) == errc::capacity_exhausted);
  CHECK(code(StatusCode::UNAVAILABLE, call_kind::infer) == errc::unavailable);
  CHECK(code(StatusCode::DEADLINE_EXCEEDED, call_kind::load) == errc::timeout);
  CHECK(code(StatusCode::INTERNAL, call_kind::load) == errc::load_failed);
  CHECK(code(StatusCode::UNKNOWN, call_kind::load) == errc::load_failed);
  CHECK(code(StatusCode::INTERNAL, call_kind::infer) == errc::internal);
  CHECK(code(StatusCode::UNIMPLEMENTED, call_kind::other) == errc::internal);

  auto e =
      error_from_status(StatusCode::INTERNAL, "boom", "m#3", "loadModel failed:", call_kind::load);
  CHECK(e.message == "m#3: loadModel failed: INTERNAL: boom");
  auto long_text = error_from_status(StatusCode::INTERNAL, std::string(5000, 'x'), "m",
                                     "ModelInfer failed:", call_kind::infer);
  CHECK(long_text.message.size() <= 1024 + 40);
}

TEST_CASE("a runtime's text is bounded and made safe", "[mmesh]") {
  CHECK(bounded_text("plain") == "plain");
  CHECK(bounded_text("a\nb\x01") == "a b?");
  CHECK(bounded_text("\xff\xfe ok") == "?? ok");
  CHECK(bounded_text("caf\xc3\xa9", 4) == "caf");  // never half a character
  CHECK(bounded_text("caf\xc3\xa9", 5) == "caf\xc3\xa9");
  CHECK(bounded_text("\xc3", 5) == "?");  // a truncated sequence
  CHECK(bounded_text(std::string(3000, 'a')).size() == max_message_bytes);
}
