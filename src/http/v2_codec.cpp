#include "http/v2_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "http/v2_fast.hpp"
#include "http/v2_parse.hpp"
#include "v2/v2_common.hpp"

namespace warm::http {

namespace {

using json = nlohmann::json;

// Deepest container a request needs: body (0) > inputs (1) > tensor (2) > data, nested once per
// tensor dimension beyond the first. More is refused while parsing, before it is built.
constexpr int max_depth = 3 + 32;

error bad(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

// JSON text of a value. Strings that are not valid UTF-8 (a model name, bytes quoted in a parse
// error's message) get U+FFFD instead of making nlohmann throw type_error 316.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// The deepest container nesting in `text`, brackets inside strings ignored. A linear pre-scan is
// several times cheaper than a parser callback on every value (most of a request is numbers).
int nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

expected<parsed_request> parse(std::string_view body, const decode_limits& limits) {
  if (nesting(body) > max_depth + 1)
    return bad("request JSON is nested deeper than " + std::to_string(max_depth) + " levels");
  parse_bounds bounds;
  bounds.max_values = limits.max_tensor_bytes / sizeof(float) + 1;  // one more tells "too many"
  return parse_request(body, bounds);
}

// An object's "parameters"[key] when present; the end of `in` when absent, and an error when
// "parameters" is not an object.
expected<const json*> parameter(const json& in, const char* key, const std::string& where) {
  auto params = in.find("parameters");
  if (params == in.end()) return nullptr;
  if (!params->is_object()) return bad(where + ": \"parameters\" must be an object");
  auto found = params->find(key);
  return found == params->end() ? nullptr : &*found;
}

// A boolean parameter: its value, `otherwise` when absent.
expected<bool> flag(const json& in, const char* key, const std::string& where, bool otherwise) {
  auto p = parameter(in, key, where);
  if (!p) return std::move(p).error();
  if (*p == nullptr) return otherwise;
  if (!(*p)->is_boolean()) return bad(where + ": parameter \"" + key + "\" must be true or false");
  return (*p)->get<bool>();
}

// `binary`: the binary part of the body not yet taken by earlier inputs; null without one.
expected<tensor> decode_input(const json& in, std::size_t index, data_values* data, const decode_limits& limits,
                              std::string_view* binary) {
  auto where = "inputs[" + std::to_string(index) + "]";
  if (!in.is_object()) return bad(where + " must be an object");
  auto name = in.find("name");
  if (name == in.end() || !name->is_string()) return bad(where + ": \"name\" (a string) is required");
  tensor t;
  t.name = name->get<std::string>();
  auto datatype = in.find("datatype");
  if (datatype == in.end() || !datatype->is_string())
    return bad("input '" + t.name + "': \"datatype\" (a string) is required");
  if (datatype->get<std::string>() != "FP32")
    return bad("input '" + t.name + "': datatype " + dump(*datatype) + " is not supported; the model takes FP32");
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array()) return bad("input '" + t.name + "': \"shape\" (an array) is required");
  if (shape->size() > 32) return bad("input '" + t.name + "': shape has more than 32 dimensions");
  std::uint64_t count = 1;
  const std::uint64_t max_count = limits.max_tensor_bytes / sizeof(float);
  for (auto& d : *shape) {
    if (!d.is_number_unsigned())
      return bad("input '" + t.name + "': shape must hold non-negative integers, not " + dump(d));
    auto dim = d.get<std::uint64_t>();
    t.shape.push_back(dim);
    if (dim != 0 && count > max_count / dim)
      return bad("input '" + t.name + "': shape " + dump(*shape) + " exceeds the tensor limit of " +
                 std::to_string(limits.max_tensor_bytes) + " bytes");
    count *= dim;
  }
  auto binary_size = parameter(in, "binary_data_size", "input '" + t.name + "'");
  if (!binary_size) return std::move(binary_size).error();
  if (*binary_size) {
    const json& size = **binary_size;
    if (!size.is_number_unsigned())
      return bad("input '" + t.name + "': binary_data_size must be a non-negative integer, not " + dump(size));
    if (data != nullptr && data->present)
      return bad("input '" + t.name + "': has both \"data\" and binary_data_size");
    if (binary == nullptr)
      return bad("input '" + t.name + "': binary_data_size needs the Inference-Header-Content-Length header");
    const auto bytes = size.get<std::uint64_t>();
    if (bytes != count * sizeof(float))
      return bad("input '" + t.name + "': binary_data_size is " + std::to_string(bytes) + "; shape " + dump(*shape) +
                 " needs " + std::to_string(count * sizeof(float)) + " bytes of FP32");
    if (bytes > binary->size())
      return bad("input '" + t.name + "': binary_data_size is " + std::to_string(bytes) + " but only " +
                 std::to_string(binary->size()) + " bytes of binary data are left");
    t.type = dtype::f32;
    t.data.resize(bytes);
    if (bytes) std::memcpy(t.data.data(), binary->data(), bytes);
    binary->remove_prefix(bytes);
    return t;
  }
  if (data == nullptr || !data->present)
    return bad("input '" + t.name + "': \"data\" (or binary_data_size) is required");
  if (!data->not_a_number.empty())
    return bad("input '" + t.name + "': data must hold numbers, not " + data->not_a_number);
  if (data->count > count)
    return bad("input '" + t.name + "': data holds more than the shape's " + std::to_string(count) + " elements");
  if (data->out_of_range >= 0)
    return bad("input '" + t.name + "': element " + std::to_string(data->out_of_range) + " is out of FP32 range");
  if (data->count != count)
    return bad("input '" + t.name + "': data holds " + std::to_string(data->count) + " elements; shape " +
               dump(*shape) + " needs " + std::to_string(count));
  auto& values = data->values;
  t.type = dtype::f32;
  t.data.resize(values.size() * sizeof(float));
  // An empty tensor (a 0 dimension) has no buffer: memcpy from a null pointer is undefined even
  // for 0 bytes.
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  std::vector<float>().swap(values);  // the floats live on in the tensor only
  return t;
}

// The most a float takes as written below ("-1.17549435e-38": sign, 9 digits, point, exponent),
// with room to spare, and its separator.
constexpr std::size_t max_float_chars = 24;

// Writes `value` at `at` (max_float_chars bytes free) and answers the end: the shortest text
// that reads back as the same float (std::to_chars's, which fmt writes with Dragonbox in less
// than two thirds of the time), or null for NaN and the infinities, which JSON lacks. Negative
// zero is "-0.0": JSON parsers read "-0" as the integer 0 and lose the sign.
char* write_float(char* at, float value) {
  if (!std::isfinite(value)) return std::copy_n("null", 4, at);
  if (value == 0 && std::signbit(value)) return std::copy_n("-0.0", 4, at);
  return fmt::format_to(at, FMT_COMPILE("{}"), value);
}

// Appends `values` (FP32 bytes) as a JSON array's elements, written in place: the string grows
// once by the most they can take and is cut back to what they took.
void append_floats(std::string& out, const std::vector<std::byte>& values) {
  std::size_t n = values.size() / sizeof(float);
  std::size_t start = out.size();
  out.resize(start + n * max_float_chars);
  char* at = out.data() + start;
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, values.data() + i * sizeof(float), sizeof v);
    if (i) *at++ = ',';
    at = write_float(at, v);
  }
  out.resize(static_cast<std::size_t>(at - out.data()));
}

// A JSON string: printable ASCII without quotes or backslashes as it is (model ids, names),
// anything else through the JSON library's escaping.
void append_string(std::string& out, const std::string& s) {
  bool plain = std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (!plain) {
    out += dump(s);
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

}  // namespace

expected<v2_request> decode_infer_request(std::string_view body, const decode_limits& limits,
                                          std::optional<std::size_t> json_length) {
  std::optional<std::string_view> binary;
  if (json_length) {
    if (*json_length > body.size())
      return bad("Inference-Header-Content-Length is " + std::to_string(*json_length) + ", past the body's " +
                 std::to_string(body.size()) + " bytes");
    binary = body.substr(*json_length);
    body = body.substr(0, *json_length);
  }
  const std::string_view* binary_part = binary ? &*binary : nullptr;
  if (auto fast = fast_decode_infer_request(body, binary_part, limits)) return std::move(*fast);
  return decode_infer_request_general(body, binary_part, limits);
}

expected<v2_request> decode_infer_request_general(std::string_view body, const std::string_view* binary_part,
                                                  const decode_limits& limits) {
  std::optional<std::string_view> binary;
  if (binary_part) binary = *binary_part;
  auto parsed = parse(body, limits);
  if (!parsed) return std::move(parsed).error();
  const json& root = parsed->root;
  if (!root.is_object()) return bad("request body must be a JSON object");
  v2_request out;
  if (auto id = root.find("id"); id != root.end()) {
    if (!id->is_string()) return bad("\"id\" must be a string");
    out.id = id->get<std::string>();
  }
  auto inputs = root.find("inputs");
  if (inputs == root.end() || !inputs->is_array() || inputs->empty())
    return bad("\"inputs\" (a non-empty array) is required");
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    auto t = decode_input((*inputs)[i], i, i < parsed->data.size() ? &parsed->data[i] : nullptr, limits,
                          binary ? &*binary : nullptr);
    if (!t) return std::move(t).error();
    out.request.inputs.push_back(std::move(*t));
  }
  if (binary && !binary->empty())
    return bad(std::to_string(binary->size()) + " bytes of binary data are left over after the inputs' binary_data_size");
  auto binary_output = flag(root, "binary_data_output", "request", false);
  if (!binary_output) return std::move(binary_output).error();
  out.binary_output = *binary_output;
  if (auto outputs = root.find("outputs"); outputs != root.end()) {
    if (!outputs->is_array()) return bad("\"outputs\" must be an array");
    for (auto& o : *outputs) {
      auto name = o.is_object() ? o.find("name") : o.end();
      if (!o.is_object() || name == o.end() || !name->is_string())
        return bad("each requested output must be an object with a \"name\"");
      if (name->get<std::string>() != "output")
        return bad("unknown output '" + name->get<std::string>() + "'; the model's output is 'output'");
      auto binary_data = flag(o, "binary_data", "output 'output'", out.binary_output);
      if (!binary_data) return std::move(binary_data).error();
      out.binary_output = *binary_data;
    }
  }
  return out;
}

std::string encode_infer_response(const infer_result& result, const std::string& id, bool binary,
                                  std::size_t* json_length) {
  std::string out = "{\"model_name\":";
  append_string(out, result.model);
  if (!id.empty()) {
    out += ",\"id\":";
    append_string(out, id);
  }
  out += ",\"parameters\":{\"warm_cache_hit\":";
  out += result.cache_hit ? "true" : "false";
  out += ",\"warm_load_wait_ms\":" + dump(result.load_wait_ms) + "},\"outputs\":[";
  bool first_tensor = true;
  for (auto& t : result.outputs) {
    if (!first_tensor) out += ',';
    first_tensor = false;
    out += "{\"name\":";
    append_string(out, t.name);
    out += ",\"datatype\":\"FP32\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out += ',';
      out += std::to_string(t.shape[d]);
    }
    out += ']';
    if (binary) {
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.data.size()) + "}}";
      continue;
    }
    out += ",\"data\":[";
    append_floats(out, t.data);
    out += "]}";
  }
  out += "]}";
  if (json_length) *json_length = out.size();
  if (binary)
    for (auto& t : result.outputs) out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

std::string encode_model_metadata(const std::string& name, const model_metadata& meta) {
  json body = {
      {"name", name},
      {"versions", meta.version ? json::array({std::to_string(*meta.version)}) : json::array()},
      {"platform", "warm_dense"},
      {"inputs", json::array({{{"name", "input"}, {"datatype", "FP32"}, {"shape", {-1, meta.input_width}}}})},
      {"outputs", json::array({{{"name", "output"}, {"datatype", "FP32"}, {"shape", {-1, meta.output_width}}}})},
      {"parameters",
       {{"warm_model", meta.id}, {"warm_bytes", meta.bytes}, {"warm_layers", meta.layers}, {"warm_activation", meta.activation}}},
  };
  return dump(body);
}

std::string encode_repository_index(const std::vector<model_status>& models) {
  json list = json::array();
  for (auto& m : models) {
    json entry = {{"name", m.id}, {"state", v2::triton_state(m.state)}, {"warm_state", std::string(to_string(m.state))}};
    entry["reason"] = m.last_error ? m.last_error->message : "";
    list.push_back(std::move(entry));
  }
  return dump(list);
}

std::string encode_error(std::string_view message) { return dump(json{{"error", message}}); }

int http_status(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return 400;
    case errc::not_found: return 404;
    case errc::model_too_large:
    case errc::capacity_exhausted:
    case errc::load_failed:
    case errc::unavailable: return 503;
    case errc::timeout: return 504;
    case errc::internal: return 500;
  }
  return 500;
}

}  // namespace warm::http
