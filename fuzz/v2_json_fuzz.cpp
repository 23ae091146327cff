// Fuzz target: the KServe V2 JSON request parser (src/http/v2_codec: decode_infer_request) with
// small limits, then what the HTTP front does with its outcome: an error becomes
// encode_error(message), a decoded request goes through warm::check_inputs and its tensors come
// back through encode_infer_response. Every body the front writes must be valid JSON, and no
// exception may escape. Differential: whatever the simdjson fast path accepts, the general parser
// must decode to the very same request — for the body as it is, and split at its first NUL byte
// into JSON and binary tensor data (the binary extension).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "http/v2_codec.hpp"
#include "http/v2_fast.hpp"
#include "warm/runtime.hpp"

namespace {

using json = nlohmann::json;

constexpr std::uint64_t max_tensor_bytes = 4096;

const warm::dense_spec& model() {
  static const warm::dense_spec spec = [] {
    warm::dense_spec s;
    s.activation = warm::activation::relu;
    s.layers.push_back({16, 8, 0, 16 * 8 * 4});
    s.data_bytes = (16 * 8 + 8) * 4;
    return s;
  }();
  return spec;
}

json must_parse(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!parsed.is_discarded());
  return parsed;
}

bool same(const warm::http::v2_request& a, const warm::http::v2_request& b) {
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

// The fast path's answer, when it gives one, is the general parser's.
void check_fast_path(std::string_view json, const std::string_view* binary,
                     const warm::http::decode_limits& limits) {
  auto fast = warm::http::fast_decode_infer_request(json, binary, limits);
  if (!fast) return;
  auto general = warm::http::decode_infer_request_general(json, binary, limits);
  FUZZ_CHECK(general.has_value());
  FUZZ_CHECK(same(*fast, *general));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  warm::http::decode_limits limits;
  limits.max_tensor_bytes = max_tensor_bytes;
  check_fast_path(body, nullptr, limits);
  if (auto nul = body.find('\0'); nul != std::string_view::npos) {
    auto binary = body.substr(nul + 1);
    check_fast_path(body.substr(0, nul), &binary, limits);
  }
  auto decoded = warm::http::decode_infer_request(body, limits);
  if (!decoded) {
    FUZZ_CHECK(decoded.error().code == warm::errc::invalid_argument);
    FUZZ_CHECK(warm::http::http_status(decoded.error().code) == 400);
    auto reply = must_parse(warm::http::encode_error(decoded.error().message));
    FUZZ_CHECK(reply.is_object() && reply["error"].is_string());
    return 0;
  }

  warm::infer_result echo;
  echo.model = "m";
  for (const auto& t : decoded->request.inputs) {
    std::uint64_t count = 1;
    for (auto d : t.shape)
      FUZZ_CHECK(!__builtin_mul_overflow(count, d, &count));
    FUZZ_CHECK(count * warm::dtype_size(t.type) == t.data.size());
    FUZZ_CHECK(t.data.size() <= max_tensor_bytes);
    echo.outputs.push_back(t);
  }
  auto inputs = decoded->request.inputs;
  auto checked = warm::check_inputs(inputs, warm::dense_io(model()),
                                    warm::max_activation_elements / model().widest());
  if (!checked) must_parse(warm::http::encode_error(checked.error().message));

  // The response body carries the tensors back: same names, shapes and values.
  auto reply = must_parse(warm::http::encode_infer_response(echo, decoded->id));
  FUZZ_CHECK(reply.is_object() && reply.contains("outputs") && reply["outputs"].is_array());
  FUZZ_CHECK(reply["outputs"].size() == echo.outputs.size());
  for (std::size_t i = 0; i < echo.outputs.size(); ++i) {
    const json& out = reply["outputs"][i];
    const auto& t = echo.outputs[i];
    FUZZ_CHECK(out.contains("name") && out["name"] == t.name);
    FUZZ_CHECK(out.contains("shape") && out["shape"] == json(t.shape));
    FUZZ_CHECK(out.contains("data") && out["data"].is_array());
    FUZZ_CHECK(out["data"].size() == t.data.size() / warm::dtype_size(t.type));
    // Sent back as a request, the answer's data decodes to the very bytes (every datatype).
    json again = {{"inputs", json::array({{{"name", out["name"]},
                                           {"datatype", out["datatype"]},
                                           {"shape", out["shape"]},
                                           {"data", out["data"]}}})}};
    warm::http::decode_limits limits;
    limits.max_tensor_bytes = max_tensor_bytes;
    auto back = warm::http::decode_infer_request_general(again.dump(), nullptr, limits);
    FUZZ_CHECK(back && back->request.inputs.size() == 1);
    FUZZ_CHECK(back->request.inputs[0].type == t.type && back->request.inputs[0].data == t.data);
  }
  if (!decoded->id.empty()) FUZZ_CHECK(reply.contains("id") && reply["id"] == decoded->id);
  return 0;
}
