// The plainest V2 request's one-pass decoder (src/http/v2_plain.hpp): what it accepts decodes
// bit for bit as the simdjson fast path and the general parser decode it; what it cannot be
// certain of it declines, and the others decide.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "http/v2_fast.hpp"
#include "http/v2_plain.hpp"

using namespace warm;
using namespace warm::http;

namespace {

bool same(const v2_request& a, const v2_request& b) {
  if (a.id != b.id || a.binary_output != b.binary_output || a.outputs != b.outputs ||
      a.output_binary != b.output_binary || a.request.inputs.size() != b.request.inputs.size())
    return false;
  for (std::size_t i = 0; i < a.request.inputs.size(); ++i) {
    const auto& x = a.request.inputs[i];
    const auto& y = b.request.inputs[i];
    if (x.name != y.name || x.type != y.type || x.shape != y.shape || x.data != y.data)
      return false;
  }
  return true;
}

std::string body(const std::vector<std::string>& numbers, const std::string& shape = "") {
  std::string data;
  for (const auto& n : numbers)
    data += (data.empty() ? "" : ",") + n;
  return R"({"inputs":[{"name":"input","shape":[)" +
         (shape.empty() ? "1," + std::to_string(numbers.size()) : shape) +
         R"(],"datatype":"FP32","data":[)" + data + "]}]}";
}

// Whether the plain decoder takes `json`; when it does, the other two must agree with it exactly.
bool plain_takes(const std::string& json, const decode_limits& limits = {}) {
  auto plain = plain_decode_infer_request(json, limits);
  if (!plain) return false;
  auto fast = fast_decode_infer_request(json, nullptr, limits);
  auto general = decode_infer_request_general(json, nullptr, limits);
  INFO(json.substr(0, 300));
  REQUIRE(fast);
  REQUIRE(general);
  CHECK(same(*plain, *fast));
  CHECK(same(*plain, *general));
  return true;
}

std::string printed(const char* format, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

}  // namespace

TEST_CASE("the plain decoder agrees bit for bit with the other two on the numbers it takes") {
  std::mt19937 rng(20261128);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::normal_distribution<double> normal(0.0, 3.0);
  // Ordinary numbers, as clients print them: every body is taken, and agrees.
  const char* formats[] = {"%.9g", "%.8g", "%.6g", "%.3f", "%.7e", "%.1E", "%.0f", "%.12g"};
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> numbers;
    for (int i = 0; i < 64; ++i) {
      double v = i % 3 == 0   ? normal(rng)
                 : i % 3 == 1 ? std::ldexp(normal(rng), static_cast<int>(bits(rng) % 40) - 20)
                              : std::round(normal(rng) * 1e6);
      numbers.push_back(printed(formats[(i + round) % 8], v));
    }
    numbers.push_back(std::to_string(static_cast<long long>(bits(rng)) - 2147483648LL));
    CHECK(plain_takes(body(numbers)));
  }
  // Any float at all, in its shortest and its longest forms: taken and agreeing, or declined
  // (a decimal exponent past 22, more than 19 digits).
  int taken = 0;
  for (int i = 0; i < 20000; ++i) {
    std::uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (!std::isfinite(f)) continue;
    if (plain_takes(body({printed(i % 2 ? "%.9g" : "%.17g", f)}))) ++taken;
  }
  CHECK(taken > 0);
  // Decimals at the midpoint between two floats, to 17 digits: where reading the double with a
  // second rounding (as an inexact method would) picks the other float. Taken only where exact.
  for (int i = 0; i < 20000; ++i) {
    float f = static_cast<float>(
        std::ldexp(std::fabs(normal(rng)) + 0.5, static_cast<int>(bits(rng) % 30) - 15));
    double mid = (static_cast<double>(f) + static_cast<double>(std::nextafter(f, FLT_MAX))) / 2;
    plain_takes(body({printed("%.17g", mid), printed("%.16g", mid), printed("%.18g", mid)}));
  }
  // Every layout it knows, each alone.
  for (const char* n : {"0",
                        "-0",
                        "0.0",
                        "-0.0",
                        "1",
                        "-1",
                        "1.5",
                        "1e5",
                        "1E-5",
                        "-2.5e+3",
                        "0.000123",
                        "123456789",
                        "9007199254740993",
                        "-9223372036854775807",
                        "1e-22",
                        "1e22",
                        "0.1",
                        "16777217",
                        "1.00000012",
                        "4.2949673e9",
                        "3.4028235e20"}) {
    INFO(n);
    CHECK(plain_takes(body({n})));
  }
  // Whitespace anywhere between tokens, and shapes of any rank.
  CHECK(plain_takes(
      " {\n\"inputs\" : [ {\"name\":\"x y\", \"shape\": [2, 1 ,2],\r\n \"datatype\" : \"FP32\","
      " \"data\" : [ 1 , 2,3 ,\t4 ] } ] } \n"));
}

TEST_CASE("-0 as an integer is 0, as a decimal -0.0, as the other parsers read them") {
  auto integer = plain_decode_infer_request(body({"-0"}), {});
  auto decimal = plain_decode_infer_request(body({"-0.0"}), {});
  REQUIRE(integer);
  REQUIRE(decimal);
  float a, b;
  std::memcpy(&a, integer->request.inputs[0].data.data(), sizeof a);
  std::memcpy(&b, decimal->request.inputs[0].data.data(), sizeof b);
  CHECK_FALSE(std::signbit(a));
  CHECK(std::signbit(b));
}

TEST_CASE("the plain decoder declines what it cannot be certain of, and anything else") {
  const std::vector<std::string> declined{
      // numbers past its certainty, or not JSON, or out of float range
      body({"1.2345678901234567890"}), body({"1e23"}), body({"3.4028235e38"}), body({"1.4e-45"}),
      body({"9999999999999999999e3"}), body({"1e-23"}), body({"12345678901234567890"}),
      body({"9223372036854775808"}), body({"1e400"}), body({"3.5e38"}), body({"01"}), body({"1."}),
      body({".5"}), body({"+1"}), body({"1e"}), body({"-"}), body({"NaN"}), body({"Infinity"}),
      body({"1e0001"}), body({"\"1\""}), body({"[1]"}), body({"true"}), body({"null"}),
      // counts and shapes
      body({"1", "2"}, "1,3"), body({"1", "2", "3"}, "1,2"), body({"1"}, "0"), body({"1"}, "-1"),
      body({"1"}, "1.0"), body({"1"}, "01"), body({"1"}, " "),
      body({"1"}, "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"),
      body({"1"}, "16000000"),  // a short body naming a huge shape
      // anything but the one plain layout
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"id":"x"})",
      R"({"id":"x","inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"shape":[1],"name":"a","datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP16","data":[1]}]})",
      R"({"inputs":[{"name":"a\"b","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"a\u0041","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","data":[[1,2]]}]})",
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"name":"b","shape":[1],"datatype":"FP32","data":[1]}]})",
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]} x)",
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}])",
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1,]}]})",
      std::string("{\"inputs\":[{\"name\":\"\xc3\xa9\",\"shape\":[1],\"datatype\":\"FP32\","
                  "\"data\":[1]}]}"),
      "", "{}", "[]"};
  for (const auto& json : declined) {
    INFO(json.substr(0, 200));
    CHECK_FALSE(plain_decode_infer_request(json, {}));
  }
  // A tensor over the limit is declined (the general parser names the limit).
  decode_limits small;
  small.max_tensor_bytes = 8;
  CHECK(plain_takes(body({"1", "2"}), small));
  CHECK_FALSE(plain_decode_infer_request(body({"1", "2", "3"}), small));
}
