// The KServe V2 JSON codec: request bodies decoded (flat and nested data, every malformed shape
// of input refused with a clear message), responses and metadata encoded as clients parse them.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "http/decode_budget.hpp"
#include "http/v2_codec.hpp"
#include "http/v2_fast.hpp"
#include "http/v2_parse.hpp"
#include "v2/v2_common.hpp"

using namespace warm;
using namespace warm::http;
using json = nlohmann::json;

namespace {

std::vector<float> floats(const tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

std::string error_of(std::string_view body, const decode_limits& limits = {}) {
  auto r = decode_infer_request(body, limits);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_argument);
  return r.error().message;
}

}  // namespace

TEST_CASE("flat and nested data decode to the same row-major tensor") {
  auto flat = decode_infer_request(
      R"({"id":"r1","inputs":[{"name":"input","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6.5]}]})");
  auto nested = decode_infer_request(
      R"({"inputs":[{"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6.5]],"parameters":{}}],
          "outputs":[{"name":"output"}],"parameters":{"x":1}})");
  REQUIRE(flat);
  REQUIRE(nested);
  CHECK(flat->id == "r1");
  CHECK(nested->id.empty());
  auto& t = flat->request.inputs.at(0);
  CHECK(t.name == "input");
  CHECK(t.type == dtype::f32);
  CHECK(t.shape == std::vector<std::uint64_t>{2, 3});
  CHECK(floats(t) == std::vector<float>{1, 2, 3, 4, 5, 6.5f});
  CHECK(floats(nested->request.inputs.at(0)) == floats(t));
}

TEST_CASE("malformed requests are invalid_argument with a message naming the problem") {
  CHECK_THAT(error_of("{\"inputs\":["), Catch::Contains("not valid JSON"));
  CHECK_THAT(error_of("[1,2]"), Catch::Contains("JSON object"));
  CHECK_THAT(error_of("{}"), Catch::Contains("\"inputs\""));
  CHECK_THAT(error_of(R"({"inputs":[]})"), Catch::Contains("non-empty"));
  CHECK_THAT(error_of(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})"),
             Catch::Contains("\"name\""));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[1,2],"datatype":"BYTES","data":[1,2]}]})"),
      Catch::Contains("BYTES") && Catch::Contains("not supported"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"input","shape":[1,2],"data":[1,2]}]})"),
             Catch::Contains("datatype"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2]}]})"),
      Catch::Contains("2 elements") && Catch::Contains("needs 3"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[1,1],"datatype":"FP32","data":[1,2]}]})"),
      Catch::Contains("more than"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[2],"datatype":"FP32","data":[1,"2"]}]})"),
      Catch::Contains("numbers"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1e300]}]})"),
      Catch::Contains("FP32 range"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"input","shape":[-1],"datatype":"FP32","data":[1]}]})"),
             Catch::Contains("non-negative"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[1.5],"datatype":"FP32","data":[1]}]})"),
      Catch::Contains("non-negative"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32"}]})"),
             Catch::Contains("\"data\""));
  CHECK_THAT(
      error_of(R"({"id":7,"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}]})"),
      Catch::Contains("\"id\""));
  // Requested outputs are kept by name; one the model lacks is refused once its outputs are known
  // (select_outputs).
  auto asked =
      decode_infer_request(R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}],
                                        "outputs":[{"name":"logits"},{"name":"output"}]})");
  REQUIRE(asked);
  CHECK(asked->outputs == std::vector<std::string>{"logits", "output"});
}

TEST_CASE("limits are checked before anything is allocated for the tensor") {
  decode_limits small;
  small.max_tensor_bytes = 64;
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[4,5],"datatype":"FP32","data":[]}]})", small),
      Catch::Contains("tensor limit"));
  // A shape whose product overflows 64 bits is refused, not wrapped.
  CHECK_THAT(
      error_of(
          R"({"inputs":[{"name":"input","shape":[4294967296,4294967296,16],"datatype":"FP32","data":[]}]})"),
      Catch::Contains("tensor limit"));
  std::string deep = "{\"inputs\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK_THAT(error_of(deep), Catch::Contains("nested deeper"));
  // The boundary: a body 36 deep (33 arrays of data inside the request's object, its "inputs"
  // array and the input's object) is read; 37 deep is refused.
  auto nested_data = [](int levels) {
    return R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":)" +
           std::string(levels, '[') + "1" + std::string(levels, ']') + "}]}";
  };
  auto deepest = decode_infer_request(nested_data(33));
  REQUIRE(deepest);
  CHECK(floats(deepest->request.inputs.at(0)) == std::vector<float>{1});
  CHECK_THAT(error_of(nested_data(34)), Catch::Contains("nested deeper than 35 levels"));
  // A zero-sized tensor decodes (the runtime then says a batch must be at least 1).
  auto empty = decode_infer_request(
      R"({"inputs":[{"name":"input","shape":[0,4],"datatype":"FP32","data":[]}]})");
  REQUIRE(empty);
  CHECK(empty->request.inputs[0].data.empty());
}

TEST_CASE("tensor data is read straight into floats; everything else is bounded in JSON values") {
  // data before the shape and name, nested unevenly, a scalar as data, two inputs: all decode.
  auto r = decode_infer_request(
      R"({"inputs":[{"data":[[1,2],[3,4.5]],"datatype":"FP32","shape":[2,2],"name":"x"},
                                              {"name":"y","shape":[1],"datatype":"FP32","data":7}],
                                    "parameters":{"data":[{"k":"v"}]}})");
  REQUIRE(r);
  REQUIRE(r->request.inputs.size() == 2);
  CHECK(floats(r->request.inputs[0]) == std::vector<float>{1, 2, 3, 4.5f});
  CHECK(floats(r->request.inputs[1]) == std::vector<float>{7});
  // Anything but numbers inside data, at any depth, is named.
  CHECK_THAT(
      error_of(
          R"({"inputs":[{"name":"input","shape":[2],"datatype":"FP32","data":[1,{"a":[2]}]}]})"),
      Catch::Contains("numbers, not object"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[2],"datatype":"FP32","data":{"a":1}}]})"),
      Catch::Contains("numbers, not object"));
  CHECK_THAT(
      error_of(
          R"({"inputs":[{"name":"input","shape":[2],"datatype":"FP32","data":[[1],[null]]}]})"),
      Catch::Contains("numbers, not null"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[2],"datatype":"FP32","data":[true,1]}]})"),
      Catch::Contains("numbers, not boolean"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"input","shape":[3],"datatype":"FP32","data":[1,2,1e39]}]})"),
      Catch::Contains("element 2 is out of FP32 range"));
  // A body of empty objects (a DOM ~30 times its size) is refused at the bound, not built.
  std::string objects = "[";
  for (int i = 0; i < 70000; ++i)
    objects += "{},";
  objects += "{}]";
  CHECK_THAT(error_of(objects), Catch::Contains("values outside tensor data"));
  std::string params =
      R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}],"parameters":{"p":[)";
  for (int i = 0; i < 70000; ++i)
    params += "0,";
  params += "0]}}";
  CHECK_THAT(error_of(params), Catch::Contains("values outside tensor data"));
  // Numbers past the tensor limit are counted, not kept.
  decode_limits small;
  small.max_tensor_bytes = 16;
  CHECK_THAT(
      error_of(
          R"({"inputs":[{"name":"input","shape":[4],"datatype":"FP32","data":[1,2,3,4,5,6,7,8,9]}]})",
          small),
      Catch::Contains("more than the shape's 4"));
}

TEST_CASE("every finite float in an answer reads back bit for bit, the longest texts included") {
  std::vector<float> values{-FLT_MAX, -FLT_MIN, -FLT_TRUE_MIN, -1.00000012f,    -1.17549435e-38f,
                            -0.0f,    1e-45f,   -123456.789f,  3.40282347e+38f, -9.99999944e-39f};
  std::mt19937 rng(20261124);  // seed printed on failure by the check's message
  std::uniform_int_distribution<std::uint32_t> bits;
  while (values.size() < 20000) {
    std::uint32_t b = bits(rng);
    float v;
    std::memcpy(&v, &b, sizeof v);
    if (std::isfinite(v)) values.push_back(v);
  }
  infer_result r;
  r.model = "m";
  tensor out;
  out.name = "output";
  out.shape = {1, values.size()};
  out.data.resize(sizeof(float) * values.size());
  std::memcpy(out.data.data(), values.data(), out.data.size());
  r.outputs.push_back(out);
  auto text = encode_infer_response(r, "");
  auto data = json::parse(text)["outputs"][0]["data"];
  REQUIRE(data.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    float back = data[i].get<float>();
    INFO("seed 20261124, value " << i);
    CHECK(std::memcmp(&back, &values[i], sizeof back) == 0);
  }
}

TEST_CASE("responses, metadata and errors are JSON clients can read back") {
  infer_result r;
  r.model = "m\"1";
  r.cache_hit = true;
  r.load_wait_ms = 0;
  tensor out;
  out.name = "output";
  out.shape = {1, 3};
  std::vector<float> values{0.1f, -2.5f, NAN};
  out.data.resize(sizeof(float) * 3);
  std::memcpy(out.data.data(), values.data(), out.data.size());
  r.outputs.push_back(out);
  auto body = json::parse(encode_infer_response(r, "req-9"));
  CHECK(body["model_name"] == "m\"1");
  CHECK(body["id"] == "req-9");
  CHECK(body["parameters"]["warm_cache_hit"] == true);
  auto& o = body["outputs"][0];
  CHECK(o["datatype"] == "FP32");
  CHECK(o["shape"] == json::array({1, 3}));
  CHECK(o["data"][0].get<float>() == 0.1f);  // shortest round-trip form reads back exactly
  CHECK(o["data"][1].get<float>() == -2.5f);
  CHECK(o["data"][2].is_null());  // NaN has no JSON form
  CHECK(json::parse(encode_infer_response(r, "")).count("id") == 0);
  // The wait as the JSON library writes a double: 0.0 for a hit, as written for any other.
  CHECK(encode_infer_response(r, "").find("\"warm_load_wait_ms\":0.0}") != std::string::npos);
  for (double waited : {-0.0, 12.5, 1e-7, 250.0}) {
    r.load_wait_ms = waited;
    CHECK(encode_infer_response(r, "").find("\"warm_load_wait_ms\":" + json(waited).dump() + "}") !=
          std::string::npos);
  }
  r.load_wait_ms = 0;

  model_metadata meta;
  meta.id = "m";
  meta.version = 3;
  meta.kind = "dense";
  meta.io.batched = true;
  meta.io.inputs = {{"input", dtype::f32, {-1, 16}}};
  meta.io.outputs = {{"output", dtype::f32, {-1, 8}}};
  auto md = json::parse(encode_model_metadata("alias", meta, {3}));
  CHECK(md["platform"] == "warm_dense");
  CHECK(md["inputs"][0]["datatype"] == "FP32");
  CHECK(md["name"] == "alias");
  CHECK(md["versions"] == json::array({"3"}));
  CHECK(md["inputs"][0]["shape"] == json::array({-1, 16}));
  CHECK(md["outputs"][0]["shape"] == json::array({-1, 8}));
  CHECK(md["parameters"]["warm_model"] == "m");
  // A served model lists every version it serves, not only the one described.
  CHECK(json::parse(encode_model_metadata("m", meta, {1, 3}))["versions"] ==
        json::array({"1", "3"}));
  CHECK(json::parse(encode_model_metadata("m", meta, {}))["versions"] == json::array());

  model_status loaded, failed;
  loaded.id = "a";
  loaded.state = model_state::loaded;
  failed.id = "b";
  failed.state = model_state::loading_failed;
  failed.last_error = make_error(errc::load_failed, "disk gone");
  auto index = json::parse(encode_repository_index({loaded, failed}));
  CHECK(index[0]["state"] == "READY");
  CHECK(index[1]["state"] == "UNAVAILABLE");
  CHECK(index[1]["reason"] == "disk gone");
  CHECK(json::parse(encode_error("bad \"x\""))["error"] == "bad \"x\"");
}

TEST_CASE("bytes that are not UTF-8 never make an encoder throw (found by fuzz/v2_json_fuzz)") {
  // A body with a stray byte: nlohmann's parse error quotes it, and the error reply used to throw
  // type_error 316 while encoding that message (a 500 instead of a 400).
  auto message = error_of("{\"inputs\":\xff}");
  auto body = json::parse(encode_error(message));
  CHECK(body["error"].get<std::string>().find("\xEF\xBF\xBD") != std::string::npos);  // U+FFFD
  infer_result r;
  r.model = "m\xc3";
  auto response = json::parse(encode_infer_response(r, "id\xff"));
  CHECK(response["model_name"] == "m\xEF\xBF\xBD");
  model_metadata meta;
  meta.id = "\xfe";
  CHECK_NOTHROW(json::parse(encode_model_metadata("\x80", meta, {})));
}

TEST_CASE("an empty tensor (a 0 dimension) decodes to no data (found by fuzz/v2_json_fuzz)") {
  // Its values vector has no buffer; copying from it was memcpy(dst, nullptr, 0): undefined.
  auto r = decode_infer_request(
      R"({"inputs":[{"name":"input","shape":[0,4],"datatype":"FP32","data":[]}]})");
  REQUIRE(r);
  CHECK(r->request.inputs.at(0).data.empty());
  CHECK(r->request.inputs.at(0).shape == std::vector<std::uint64_t>{0, 4});
}

TEST_CASE("error codes map to HTTP statuses; a client's mistake is never a 500") {
  CHECK(http_status(errc::invalid_argument) == 400);
  CHECK(http_status(errc::not_found) == 404);
  CHECK(http_status(errc::load_failed) == 503);
  CHECK(http_status(errc::model_too_large) == 503);
  CHECK(http_status(errc::unavailable) == 503);
  CHECK(http_status(errc::timeout) == 504);
  CHECK(http_status(errc::internal) == 500);
}

namespace {

// A body of the binary tensor data extension: JSON, then `data` as raw FP32 bytes.
std::string with_binary(const std::string& header, const std::vector<float>& data) {
  std::string body = header;
  body.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  return body;
}

std::string binary_error(const std::string& body, std::optional<std::size_t> json_length) {
  auto r = decode_infer_request(body, {}, json_length);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_argument);
  return r.error().message;
}

}  // namespace

TEST_CASE("binary input data: the bytes after Inference-Header-Content-Length, input by input") {
  const std::string header =
      R"({"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
      R"({"name":"b","shape":[1,2],"datatype":"FP32","data":[5,6]},)"
      R"({"name":"c","shape":[3],"datatype":"FP32","parameters":{"binary_data_size":12}}]})";
  auto body = with_binary(header, {1.5f, -2, 3, 4, 0.25f});
  auto r = decode_infer_request(body, {}, header.size());
  REQUIRE(r);
  REQUIRE(r->request.inputs.size() == 3);
  CHECK(floats(r->request.inputs[0]) == std::vector<float>{1.5f, -2});
  CHECK(floats(r->request.inputs[1]) == std::vector<float>{5, 6});
  CHECK(floats(r->request.inputs[2]) == std::vector<float>{3, 4, 0.25f});
  CHECK(r->request.inputs[2].shape == std::vector<std::uint64_t>{3});
  CHECK_FALSE(r->binary_output);

  // An empty binary part is fine when no input has binary data.
  const std::string plain =
      R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[7]}]})";
  auto no_binary = decode_infer_request(plain, {}, plain.size());
  REQUIRE(no_binary);
  CHECK(floats(no_binary->request.inputs[0]) == std::vector<float>{7});
}

TEST_CASE("binary input data that does not add up is refused, naming the sizes") {
  const std::string one =
      R"({"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  CHECK_THAT(binary_error(with_binary(one, {1, 2}), one.size() + 9),
             Catch::Contains("past the body's"));
  CHECK_THAT(binary_error(with_binary(one, {1, 2}), std::nullopt),
             Catch::Contains("binary_data_size needs the Inference-Header-Content-Length"));
  CHECK_THAT(binary_error(with_binary(one, {1}), one.size()), Catch::Contains("only 4 bytes"));
  CHECK_THAT(binary_error(with_binary(one, {1, 2, 3}), one.size()),
             Catch::Contains("4 bytes of binary data are left over"));
  const std::string wrong =
      R"({"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":12}}]})";
  CHECK_THAT(binary_error(with_binary(wrong, {1, 2, 3}), wrong.size()),
             Catch::Contains("binary_data_size is 12") && Catch::Contains("needs 8 bytes"));
  const std::string both =
      R"({"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","data":[1,2],"parameters":{"binary_data_size":8}}]})";
  CHECK_THAT(binary_error(with_binary(both, {1, 2}), both.size()), Catch::Contains("both"));
  const std::string negative =
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}}]})";
  CHECK_THAT(binary_error(negative, negative.size()), Catch::Contains("non-negative integer"));
  const std::string params =
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":[4]}]})";
  CHECK_THAT(binary_error(params, params.size()),
             Catch::Contains("\"parameters\" must be an object"));
  const std::string flag =
      R"({"parameters":{"binary_data_output":1},"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]})";
  CHECK_THAT(binary_error(flag, std::nullopt), Catch::Contains("must be true or false"));
}

TEST_CASE(
    "binary output: asked by the request or by the output, the output's own setting winning") {
  const std::string input =
      R"("inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}])";
  // Per output of an answer with `answered` outputs, whether each goes as binary (through the
  // general parser; the fast path must agree, fast_path_takes below).
  auto asks = [&](const std::string& rest, std::size_t answered = 1) {
    auto r = decode_infer_request("{" + input + rest + "}");
    REQUIRE(r);
    return binary_outputs(*r, answered);
  };
  using flags = std::vector<bool>;
  CHECK(asks("") == flags{false});
  CHECK(asks("", 2) == flags{false, false});
  CHECK(asks(R"(,"parameters":{"binary_data_output":true})", 2) == flags{true, true});
  CHECK(asks(R"(,"outputs":[{"name":"output","parameters":{"binary_data":true}}])") == flags{true});
  const std::string request_binary = R"(,"parameters":{"binary_data_output":true})";
  CHECK(asks(request_binary +
             R"(,"outputs":[{"name":"output","parameters":{"binary_data":false}}])") ==
        flags{false});
  CHECK(asks(request_binary + R"(,"outputs":[{"name":"output"}])") == flags{true});
  // Each output decides for itself: the last one does not decide for the others.
  const std::string a_binary = R"({"name":"a","parameters":{"binary_data":true}})";
  const std::string a_json = R"({"name":"a","parameters":{"binary_data":false}})";
  const std::string b_binary = R"({"name":"b","parameters":{"binary_data":true}})";
  const std::string b_json = R"({"name":"b","parameters":{"binary_data":false}})";
  CHECK(asks(R"(,"outputs":[)" + a_binary + "," + b_json + "]", 2) == flags{true, false});
  CHECK(asks(R"(,"outputs":[)" + a_json + "," + b_binary + "]", 2) == flags{false, true});
  CHECK(asks(request_binary + R"(,"outputs":[{"name":"a"},)" + b_json + "]", 2) ==
        flags{true, false});

  infer_result r;
  r.model = "m";
  tensor out;
  out.name = "output";
  out.shape = {1, 3};
  std::vector<float> values{1.5f, -0.0f, 3e-8f};
  out.data.resize(values.size() * sizeof(float));
  std::memcpy(out.data.data(), values.data(), out.data.size());
  r.outputs.push_back(out);
  std::size_t json_length = 0;
  auto body = encode_infer_response(r, "id-1", true, &json_length);
  REQUIRE(json_length + 12 == body.size());
  auto head = json::parse(body.substr(0, json_length));
  CHECK(head["outputs"][0]["parameters"]["binary_data_size"] == 12);
  CHECK(head["outputs"][0].count("data") == 0);
  CHECK(head["outputs"][0]["shape"] == json::array({1, 3}));
  std::vector<float> back(3);
  std::memcpy(back.data(), body.data() + json_length, 12);
  CHECK(std::memcmp(back.data(), values.data(), 12) == 0);  // bit for bit, -0 included
}

TEST_CASE(
    "binary output: each output written as it asked, binary ones after the JSON in their order") {
  infer_result r;
  r.model = "m";
  auto add = [&](const std::string& name, std::vector<float> values) {
    tensor t;
    t.name = name;
    t.shape = {1, values.size()};
    t.data.resize(values.size() * sizeof(float));
    std::memcpy(t.data.data(), values.data(), t.data.size());
    r.outputs.push_back(std::move(t));
  };
  add("output_0", {1, 2});
  add("output_1", {3, 4, 5});
  add("output_2", {6});
  std::size_t json_length = 0;
  auto body = encode_infer_response(r, "", std::vector<bool>{true, false, true}, &json_length);
  REQUIRE(json_length + 8 + 4 == body.size());
  auto head = json::parse(body.substr(0, json_length));
  CHECK(head["outputs"][0]["parameters"]["binary_data_size"] == 8);
  CHECK(head["outputs"][0].count("data") == 0);
  CHECK(head["outputs"][1]["data"] == json::array({3, 4, 5}));
  CHECK(head["outputs"][1].count("parameters") == 0);
  CHECK(head["outputs"][2]["parameters"]["binary_data_size"] == 4);
  std::vector<float> tail(3);
  std::memcpy(tail.data(), body.data() + json_length, 12);
  CHECK(tail == std::vector<float>{1, 2, 6});

  // All JSON: no binary part at all.
  auto plain = encode_infer_response(r, "", std::vector<bool>{false, false, false}, &json_length);
  CHECK(json_length == plain.size());
  CHECK(json::parse(plain)["outputs"][0]["data"] == json::array({1, 2}));
}

namespace {

// Whether the simdjson fast path takes `body`, and then that the general parser decodes it to the
// same request, bit for bit.
bool fast_path_takes(const std::string& body, const std::string_view* binary = nullptr) {
  auto fast = fast_decode_infer_request(body, binary, {});
  if (!fast) return false;
  auto general = decode_infer_request_general(body, binary, {});
  REQUIRE(general);
  CHECK(fast->id == general->id);
  CHECK(fast->binary_output == general->binary_output);
  CHECK(fast->outputs == general->outputs);
  CHECK(fast->output_binary == general->output_binary);
  REQUIRE(fast->request.inputs.size() == general->request.inputs.size());
  for (std::size_t i = 0; i < fast->request.inputs.size(); ++i) {
    CHECK(fast->request.inputs[i].name == general->request.inputs[i].name);
    CHECK(fast->request.inputs[i].shape == general->request.inputs[i].shape);
    CHECK(fast->request.inputs[i].data == general->request.inputs[i].data);
  }
  return true;
}

}  // namespace

TEST_CASE("the fast path takes the common requests and decodes them as the general parser does") {
  CHECK(fast_path_takes(
      R"({"id":"r1","inputs":[{"name":"input","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6.5]}]})"));
  CHECK(fast_path_takes(
      R"({"inputs":[{"name":"input","shape":[2,2],"datatype":"FP32","data":[[1,-0],[-0.0,1e-3]]}],
                            "outputs":[{"name":"output","parameters":{"binary_data":true}}],
                            "parameters":{"binary_data_output":false}})"));
  CHECK(fast_path_takes(R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}],
                            "outputs":[{"name":"output"}],"parameters":{"binary_data_output":true}})"));
  CHECK(fast_path_takes(
      R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","data":[9007199254740993,-12,3.4e38]}]})"));
  const std::string header =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  const std::string bytes(8, '\x01');
  std::string_view binary(bytes);
  CHECK(fast_path_takes(header, &binary));
}

// Several requested outputs: the fast path keeps every one, in order, each with its own
// binary_data, and an output without one takes the request's binary_data_output (never the
// output before it), exactly as the general parser decodes the same body.
TEST_CASE("the fast path keeps several requested outputs in order with their own parameters") {
  const std::string input =
      R"("inputs":[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}])";
  const std::string bin = R"({"name":"output","parameters":{"binary_data":true}})";
  const std::string js = R"({"name":"output","parameters":{"binary_data":false}})";
  const std::string plain = R"({"name":"output"})";
  const std::string no_flag = R"({"name":"output","parameters":{}})";
  const std::string request_binary = R"(,"parameters":{"binary_data_output":true})";
  const std::string request_json = R"(,"parameters":{"binary_data_output":false})";
  using flags = std::vector<bool>;
  struct example {
    std::string rest;  // after the inputs
    bool binary_output;
    flags output_binary;
  };
  const example examples[] = {
      {R"(,"outputs":[)" + bin + "," + plain + "," + plain + "]", false, {true, false, false}},
      {R"(,"outputs":[)" + js + "," + bin + "," + no_flag + "," + bin + "]",
       false,
       {false, true, false, true}},
      {request_binary + R"(,"outputs":[)" + js + "," + plain + "," + bin + "," + no_flag + "]",
       true,
       {false, true, true, true}},
      {request_json + R"(,"outputs":[)" + bin + "," + no_flag + "," + js + "," + plain + "]",
       false,
       {true, false, false, false}},
      {R"(,"outputs":[)" + plain + "," + bin + "]" + request_binary, true, {true, true}},  // after
  };
  for (const auto& e : examples) {
    const std::string body = "{" + input + e.rest + "}";
    INFO(body);
    auto fast = fast_decode_infer_request(body, nullptr, {});
    REQUIRE(fast);  // the fast path takes it: what it decodes is what is served
    auto general = decode_infer_request_general(body, nullptr, {});
    REQUIRE(general);
    const std::vector<std::string> names(e.output_binary.size(), "output");
    CHECK(fast->binary_output == e.binary_output);
    CHECK(fast->outputs == names);
    CHECK(fast->output_binary == e.output_binary);
    CHECK(binary_outputs(*fast, 1) == e.output_binary);  // what the answer is written with
    CHECK(general->binary_output == e.binary_output);
    CHECK(general->outputs == names);
    CHECK(general->output_binary == e.output_binary);
    CHECK(fast_path_takes(body));  // and the rest of the request agrees too
  }
  // Outputs named otherwise go to the general parser, which keeps the names in order.
  const std::string named =
      "{" + input + R"(,"outputs":[{"name":"b"},)" + bin + R"(,{"name":"a"}]})";
  CHECK_FALSE(fast_decode_infer_request(named, nullptr, {}));
  auto decoded = decode_infer_request(named);
  REQUIRE(decoded);
  CHECK(decoded->outputs == std::vector<std::string>{"b", "output", "a"});
  CHECK(decoded->output_binary == flags{false, true, false});
}

TEST_CASE("the fast path declines what it cannot tell apart, and the general parser decides") {
  // A shape whose elements the body is too short to hold: left to the general parser (which
  // names the count), before the fast path sizes a tensor for it.
  const std::string huge =
      R"({"inputs":[{"name":"a","shape":[16000000],"datatype":"FP32","data":[1,2]}]})";
  CHECK_FALSE(fast_decode_infer_request(huge, nullptr, {}));
  auto refused = decode_infer_request(huge);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("needs 16000000"));
  // The shortest body that holds its shape's numbers is still the fast path's.
  CHECK(
      fast_path_takes(R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","data":[1,2,3]}]})"));
  // "-0" in a shape is nlohmann's signed integer (refused) but simdjson's 0.
  CHECK_FALSE(
      fast_path_takes(R"({"inputs":[{"name":"a","shape":[-0,2],"datatype":"FP32","data":[]}]})"));
  CHECK_FALSE(fast_path_takes(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"data":[2]}]})"));
  CHECK_FALSE(fast_path_takes(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"extra":1})"));
  CHECK_FALSE(fast_path_takes(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[18446744073709551616]}]})"));
  CHECK_FALSE(
      fast_path_takes(R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1e39]}]})"));
  CHECK_FALSE(
      fast_path_takes("\xEF\xBB\xBF"
                      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]})"));
  // Whatever the path, the answer is the same: the general parser's, which refuses a key given
  // twice.
  CHECK(error_of(
            R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"data":[2]}]})") ==
        "inputs[0]: \"data\" appears more than once");
}

TEST_CASE("V2 JSON tensors of every datatype: exact values in, exact values out") {
  auto r = decode_infer_request(R"({"inputs":[
      {"name":"ids","shape":[3],"datatype":"INT64","data":[9007199254740992,-9007199254740992,7]},
      {"name":"flags","shape":[2],"datatype":"BOOL","data":[true,false]},
      {"name":"h","shape":[2],"datatype":"FP16","data":[1.5,-65504]},
      {"name":"b","shape":[1],"datatype":"BF16","data":[3.0]},
      {"name":"d","shape":[1],"datatype":"FP64","data":[0.1]},
      {"name":"u","shape":[2],"datatype":"UINT8","data":[0,255]},
      {"name":"i","shape":[2],"datatype":"INT8","data":[-128,127]}]})");
  REQUIRE(r);
  const auto& in = r->request.inputs;
  REQUIRE(in.size() == 7);
  std::int64_t ids[3];
  std::memcpy(ids, in[0].data.data(), 24);
  CHECK(in[0].type == dtype::i64);
  CHECK(ids[0] == (std::int64_t{1} << 53));
  CHECK(ids[1] == -(std::int64_t{1} << 53));
  CHECK(ids[2] == 7);
  CHECK(in[1].type == dtype::boolean);
  CHECK(in[1].data == std::vector<std::byte>{std::byte{1}, std::byte{0}});
  std::uint16_t h[2], b;
  std::memcpy(h, in[2].data.data(), 4);
  CHECK(h[0] == 0x3e00);  // 1.5
  CHECK(h[1] == 0xfbff);  // -65504, the most negative half
  std::memcpy(&b, in[3].data.data(), 2);
  CHECK(b == 0x4040);  // 3.0
  double d;
  std::memcpy(&d, in[4].data.data(), 8);
  CHECK(d == 0.1);  // not rounded through a float
  CHECK(in[5].data == std::vector<std::byte>{std::byte{0}, std::byte{255}});
  CHECK(in[6].data == std::vector<std::byte>{std::byte{0x80}, std::byte{0x7f}});

  CHECK_THAT(error_of(R"({"inputs":[{"name":"i","shape":[2],"datatype":"INT8","data":[1,128]}]})"),
             Catch::Contains("element 1 is out of INT8 range"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"u","shape":[1],"datatype":"UINT8","data":[-1]}]})"),
             Catch::Contains("element 0 is out of UINT8 range"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"i","shape":[2],"datatype":"INT32","data":[1,2.5]}]})"),
             Catch::Contains("element 1 is not an integer"));
  CHECK_THAT(
      error_of(
          R"({"inputs":[{"name":"i","shape":[1],"datatype":"INT64","data":[9007199254740993]}]})"),
      Catch::Contains("beyond 2^53"));
  CHECK_THAT(error_of(R"({"inputs":[{"name":"f","shape":[2],"datatype":"BOOL","data":[1,0]}]})"),
             Catch::Contains("true or false"));
  CHECK_THAT(
      error_of(R"({"inputs":[{"name":"h","shape":[1],"datatype":"FP16","data":[65520]}]})"),
      Catch::Contains("out of FP16 range"));  // halfway past the largest half: rounds to infinity
  auto largest = decode_infer_request(
      R"({"inputs":[{"name":"h","shape":[2],"datatype":"FP16","data":[65519,-65519]},
                                         {"name":"f","shape":[1],"datatype":"FP32","data":[3.4028235e38]}]})");
  REQUIRE(
      largest);  // rounds down to the largest half; FLT_MAX's shortest text reads back as FLT_MAX
  std::uint16_t halves[2];
  std::memcpy(halves, largest->request.inputs[0].data.data(), 4);
  CHECK(halves[0] == 0x7bff);
  CHECK(halves[1] == 0xfbff);
  CHECK(floats(largest->request.inputs[1])[0] == FLT_MAX);
  CHECK_THAT(error_of(R"({"inputs":[{"name":"x","shape":[2],"datatype":"INT64","data":[1]}]})"),
             Catch::Contains("needs 2"));

  infer_result result;
  auto typed = [](std::string name, dtype type, std::vector<std::uint64_t> shape, auto values) {
    tensor t{std::move(name), type, std::move(shape), {}};
    t.data.resize(values.size() * sizeof(values[0]));
    std::memcpy(t.data.data(), values.data(), t.data.size());
    return t;
  };
  result.outputs.push_back(
      typed("ids", dtype::i64, {2}, std::vector<std::int64_t>{-(std::int64_t{1} << 62), 5}));
  result.outputs.push_back(typed("flags", dtype::boolean, {2}, std::vector<std::uint8_t>{1, 0}));
  result.outputs.push_back(typed("h", dtype::f16, {1}, std::vector<std::uint16_t>{0x3e00}));
  result.outputs.push_back(typed("d", dtype::f64, {1}, std::vector<double>{0.1}));
  auto body = json::parse(encode_infer_response(result, ""));
  CHECK(body["outputs"][0]["datatype"] == "INT64");
  CHECK(body["outputs"][0]["data"] == json::parse("[-4611686018427387904,5]"));
  CHECK(body["outputs"][1]["datatype"] == "BOOL");
  CHECK(body["outputs"][1]["data"] == json::parse("[true,false]"));
  CHECK(body["outputs"][2]["datatype"] == "FP16");
  CHECK(body["outputs"][2]["data"][0].get<double>() == 1.5);
  CHECK(body["outputs"][3]["data"][0].get<double>() == 0.1);

  REQUIRE(v2::select_outputs(result, {"d", "ids"}));
  REQUIRE(result.outputs.size() == 2);
  CHECK(result.outputs[0].name == "d");
  CHECK(result.outputs[1].name == "ids");
  auto unknown = v2::select_outputs(result, {"nope"});
  REQUIRE(!unknown);
  CHECK_THAT(unknown.error().message,
             Catch::Contains("unknown output 'nope'; the model's outputs are 'd', 'ids'"));
}

TEST_CASE("half and bfloat16 conversions round to nearest even") {
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(65520.0f) == 0x7c00);               // halfway past the largest: infinity
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);  // the smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);  // halfway to it: even, zero
  CHECK(float_to_half(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // halfway, rounds to even
  CHECK(float_to_half(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {  // every half survives the round trip
    auto h = static_cast<std::uint16_t>(bits);
    INFO(bits);
    if (!((h & 0x7c00) == 0x7c00 && (h & 0x3ff)))
      REQUIRE(float_to_half(half_to_float(h)) == h);  // NaNs aside
    if (!((h & 0x7f80) == 0x7f80 && (h & 0x7f)))
      REQUIRE(float_to_bfloat16(bfloat16_to_float(h)) == h);
  }
  CHECK(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // halfway: even
  CHECK(float_to_bfloat16(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);
}

namespace {

// The request body of one input with its keys in either order: "datatype" and "shape" before
// "data" (its numbers become the tensor's elements while they are read) or after (kept as
// doubles, converted at the end).
std::string one_input(const std::string& datatype, const std::string& shape,
                      const std::string& data, bool data_first) {
  std::string declared = R"("name":"x","datatype":")" + datatype + R"(","shape":)" + shape;
  std::string values = R"("data":)" + data;
  return R"({"inputs":[{)" + (data_first ? values + "," + declared : declared + "," + values) +
         "}]}";
}

}  // namespace

TEST_CASE("data after its shape and datatype is written as tensor elements while it is read") {
  // 1,000 UINT8 elements: 1,000 bytes held, not 1,000 doubles.
  std::string data = "[";
  for (int i = 0; i < 1000; ++i)
    data += std::to_string(i % 256) + (i < 999 ? "," : "]");
  parse_bounds bounds;
  auto typed = parse_request(one_input("UINT8", "[1000]", data, false), bounds);
  REQUIRE(typed);
  REQUIRE(typed->data.size() == 1);
  CHECK(typed->data[0].type == dtype::u8);
  CHECK(typed->data[0].bytes.size() == 1000);
  CHECK(typed->data[0].values.empty());
  CHECK(static_cast<int>(typed->data[0].bytes[300]) == 300 % 256);
  auto untyped = parse_request(one_input("UINT8", "[1000]", data, true), bounds);
  REQUIRE(untyped);
  CHECK_FALSE(untyped->data[0].type);
  CHECK(untyped->data[0].values.size() == 1000);
  // A declared shape past the tensor limit keeps nothing of its data (and is refused).
  bounds.max_tensor_bytes = 999;
  auto over = parse_request(one_input("UINT8", "[1000]", data, false), bounds);
  REQUIRE(over);
  CHECK(over->data[0].bytes.empty());
  CHECK(over->data[0].count == 1000);
  decode_limits limits;
  limits.max_tensor_bytes = 999;
  CHECK_THAT(error_of(one_input("UINT8", "[1000]", data, false), limits),
             Catch::Contains("exceeds the tensor limit"));
  // More elements than the shape holds are counted, not kept.
  auto more = parse_request(one_input("UINT8", "[10]", data, false), parse_bounds{});
  REQUIRE(more);
  CHECK(more->data[0].bytes.size() == 10);
  CHECK(more->data[0].count == 1000);
}

TEST_CASE("a tensor decodes the same whether its data comes before or after its shape") {
  struct example {
    const char* datatype;
    const char* shape;
    const char* data;
  };
  // Values, faults at several places, booleans where numbers belong and the reverse, integers
  // past 2^53: each answer (tensor bytes or message) must not depend on the key order.
  const example examples[] = {
      {"FP32", "[3]", "[1.5,-2,3e38]"},
      {"FP32", "[3]", "[1,2,1e39]"},
      {"FP16", "[2]", "[65519,-65520]"},
      {"BF16", "[2]", "[1.5,3.4e38]"},
      {"FP64", "[2]", "[1e308,-5e-324]"},
      {"INT8", "[4]", "[-128,127,0,1]"},
      {"INT8", "[3]", "[1,128,2.5]"},
      {"INT16", "[2]", "[1.5,70000]"},
      {"INT32", "[2]", "[2147483647,-2147483649]"},
      {"INT64", "[2]", "[9007199254740993,1.5]"},
      {"INT64", "[2]", "[-9007199254740992,9007199254740992]"},
      {"UINT8", "[3]", "[0,255,-1]"},
      {"UINT16", "[1]", "[65536]"},
      {"UINT32", "[2]", "[4294967295,1e10]"},
      {"UINT64", "[2]", "[1e19,2]"},
      {"BOOL", "[3]", "[true,false,true]"},
      {"BOOL", "[2]", "[true,1]"},
      {"FP32", "[2]", "[true,1]"},
      {"FP32", "[2,2]", "[[1,2],[3,4]]"},
      {"INT32", "[2]", "[1,2,3]"},
      {"INT32", "[3]", "[1,2]"},
  };
  for (const auto& e : examples) {
    INFO(e.datatype << " " << e.shape << " " << e.data);
    auto after = decode_infer_request(one_input(e.datatype, e.shape, e.data, false));
    auto before = decode_infer_request(one_input(e.datatype, e.shape, e.data, true));
    REQUIRE(bool(after) == bool(before));
    if (after)
      CHECK(after->request.inputs[0].data == before->request.inputs[0].data);
    else
      CHECK(after.error().message == before.error().message);
  }
  // The faults are named at their element, in order.
  CHECK_THAT(error_of(one_input("INT8", "[3]", "[1,128,2.5]", false)),
             Catch::Contains("element 1 is out of INT8 range"));
  CHECK_THAT(error_of(one_input("INT16", "[2]", "[1.5,70000]", false)),
             Catch::Contains("element 0 is not an integer"));
}

TEST_CASE("data before its shape is kept as doubles up to a bound; keys given twice are refused") {
  parse_bounds bounds;
  bounds.max_untyped_values = 4;
  auto parsed = parse_request(one_input("FP32", "[5]", "[1,2,3,4,5]", true), bounds);
  REQUIRE(parsed);
  CHECK(parsed->data[0].values.size() == 4);
  CHECK(parsed->data[0].count == 5);
  // Through the decoder, at the default bound (4 Mi elements) with a limit that allows more.
  std::string data = "[0";
  for (int i = 1; i <= (4 << 20); ++i)
    data += ",0";
  data += "]";
  decode_limits limits;
  limits.max_tensor_bytes = 64ull << 20;
  CHECK(error_of(one_input("UINT8", "[4194305]", data, true), limits) ==
        "input 'x': data of more than 4194304 elements must come after the input's \"shape\" and "
        "\"datatype\"");
  auto fine = decode_infer_request(one_input("UINT8", "[4194305]", data, false), limits);
  REQUIRE(fine);
  CHECK(fine->request.inputs[0].data.size() == 4194305);
  for (const char* key : {"datatype", "shape"}) {
    std::string body = std::string(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],")") +
                       key + (std::string(key) == "shape" ? R"(":[1])" : R"(":"FP32")") +
                       R"(,"data":[1]}]})";
    CHECK(error_of(body) == std::string("inputs[0]: \"") + key + "\" appears more than once");
  }
}

TEST_CASE("the decode budget: bodies wait for room, one larger than the budget goes alone") {
  using namespace std::chrono_literals;
  decode_budget budget(100);
  auto a = budget.acquire(60, 0ms);
  REQUIRE(a);
  CHECK(budget.held() == 60);
  CHECK_FALSE(budget.acquire(41, 20ms));  // 101 > 100: waits, and the wait runs out
  auto b = budget.acquire(40, 0ms);       // exactly full
  REQUIRE(b);
  CHECK(budget.held() == 100);
  // A waiter wakes when room frees.
  std::thread release([&] {
    std::this_thread::sleep_for(50ms);
    a = decode_budget::ticket();
  });
  auto c = budget.acquire(50, 5000ms);
  release.join();
  CHECK(c);
  CHECK(budget.held() == 90);
  b = decode_budget::ticket();
  c = decode_budget::ticket();
  CHECK(budget.held() == 0);
  // Larger than the whole budget: only alone.
  auto big = budget.acquire(150, 0ms);
  REQUIRE(big);
  CHECK_FALSE(budget.acquire(1, 10ms));
  big = decode_budget::ticket();
  CHECK(budget.acquire(1, 0ms));
  CHECK(budget.held() == 0);  // the ticket above was a temporary
  CHECK(decode_budget::estimate(1000, 24) == 4024);
}
