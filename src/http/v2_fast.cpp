#include "http/v2_fast.hpp"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace warm::http {
namespace {

namespace dom = simdjson::dom;
using simdjson::dom::element_type;

// Bounds that keep every accepted request far inside the general parser's own (65,536 values
// outside tensor data, 35 levels of nesting), so that both accept the same bodies.
constexpr std::size_t max_list = 64;        // inputs, outputs, parameters
constexpr std::size_t max_dimensions = 32;  // as the general parser
constexpr int max_data_depth = 8;           // nested data arrays

// A positive integer as the general parser's "unsigned" (nlohmann reads a literal without sign,
// fraction or exponent as unsigned). simdjson reads both "0" and "-0" as the integer 0, which
// nlohmann tells apart, so 0 is left to the general parser.
bool positive_integer(dom::element e, std::uint64_t& out) {
  if (e.type() == element_type::UINT64) return !e.get_uint64().get(out);
  std::int64_t v = 0;
  if (e.type() != element_type::INT64 || e.get_int64().get(v) || v <= 0) return false;
  out = static_cast<std::uint64_t>(v);
  return true;
}

// A JSON number as the general parser turns it into a float: integers through double.
bool number(dom::element e, float& out) {
  double v = 0;
  switch (e.type()) {
    case element_type::INT64: {
      std::int64_t i = 0;
      if (e.get_int64().get(i)) return false;
      v = static_cast<double>(i);
      break;
    }
    case element_type::UINT64: {
      std::uint64_t u = 0;
      if (e.get_uint64().get(u)) return false;
      v = static_cast<double>(u);
      break;
    }
    case element_type::DOUBLE:
      if (e.get_double().get(v)) return false;
      break;
    default:
      return false;
  }
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) return false;
  out = static_cast<float>(v);
  return true;
}

// Writes `data`'s numbers, row-major, flattening nested arrays, as floats into `out` from
// element `n` on (advancing it); false on anything else or past `max_count` numbers (`out` holds
// max_count floats).
bool flatten(dom::array data, int depth, std::byte* out, std::uint64_t& n,
             std::uint64_t max_count) {
  for (dom::element e : data) {
    if (e.type() == element_type::ARRAY) {
      dom::array inner;
      if (depth >= max_data_depth || e.get_array().get(inner) ||
          !flatten(inner, depth + 1, out, n, max_count))
        return false;
      continue;
    }
    float v;
    if (n >= max_count || !number(e, v)) return false;
    std::memcpy(out + n * sizeof(float), &v, sizeof v);
    ++n;
  }
  return true;
}

bool boolean(dom::element e, bool& out) {
  return e.type() == element_type::BOOL && !e.get_bool().get(out);
}

// An input object; `binary` as fast_decode_infer_request's; `json_bytes`: the JSON's length.
std::optional<tensor> input(dom::object in, std::string_view* binary, const decode_limits& limits,
                            std::size_t json_bytes) {
  std::string_view name, datatype;
  dom::array shape, data;
  bool has_name = false, has_datatype = false, has_shape = false, has_data = false,
       has_size = false;
  std::uint64_t binary_size = 0;
  for (auto field : in) {
    const auto key = field.key;
    bool* seen = key == "name"         ? &has_name
                 : key == "datatype"   ? &has_datatype
                 : key == "shape"      ? &has_shape
                 : key == "data"       ? &has_data
                 : key == "parameters" ? &has_size
                                       : nullptr;
    if (seen == nullptr || *seen) return std::nullopt;  // an unknown or repeated key
    *seen = true;
    if (key == "parameters") {
      // Only {"binary_data_size": K}, nothing else.
      dom::object params;
      if (field.value.get_object().get(params) || params.size() != 1) return std::nullopt;
      auto size = params["binary_data_size"];
      if (size.error() || !positive_integer(size.value(), binary_size)) return std::nullopt;
    } else if (key == "name"       ? field.value.get_string().get(name)
               : key == "datatype" ? field.value.get_string().get(datatype)
               : key == "shape"    ? field.value.get_array().get(shape)
                                   : field.value.get_array().get(data)) {
      return std::nullopt;  // the wrong type (a scalar "data" among them)
    }
  }
  if (!has_name || !has_datatype || !has_shape || datatype != "FP32" || has_data == has_size)
    return std::nullopt;
  tensor t;
  t.name = std::string(name);
  t.type = dtype::f32;
  if (shape.size() > max_dimensions) return std::nullopt;
  const std::uint64_t max_count = limits.max_tensor_bytes / sizeof(float);
  std::uint64_t count = 1;
  t.shape.reserve(shape.size());
  for (dom::element d : shape) {
    std::uint64_t dim = 0;
    if (!positive_integer(d, dim) || count > max_count / dim) return std::nullopt;
    count *= dim;
    t.shape.push_back(dim);
  }
  if (has_size) {
    if (binary == nullptr || binary_size != count * sizeof(float) || binary_size > binary->size())
      return std::nullopt;
    t.data.resize(binary_size);
    std::memcpy(t.data.data(), binary->data(), binary_size);
    binary->remove_prefix(binary_size);
    return t;
  }
  // Straight into the tensor's bytes, once the JSON is long enough to hold `count` numbers (each a
  // digit and a comma at least): a short body naming a huge shape is left to the general parser,
  // and never makes this one fill memory for it.
  if (count > (json_bytes + 1) / 2) return std::nullopt;
  t.data.resize(count * sizeof(float));
  std::uint64_t written = 0;
  if (!flatten(data, 1, t.data.data(), written, count) || written != count) return std::nullopt;
  return t;
}

// {"binary_data": bool} (an output's) or {"binary_data_output": bool} (the request's): the flag,
// or `otherwise` when absent; false when the object holds anything else.
bool flag_only(dom::element params, const char* key, bool& value) {
  dom::object o;
  if (params.get_object().get(o) || o.size() > 1) return false;
  if (o.size() == 0) return true;
  auto found = o[key];
  return !found.error() && boolean(found.value(), value);
}

}  // namespace

std::optional<v2_request> fast_decode_infer_request(std::string_view json,
                                                    const std::string_view* binary_part,
                                                    const decode_limits& limits) {
  if (json.size() > fast_body_limit) return std::nullopt;
  thread_local dom::parser parser(fast_body_limit);
  dom::object root;
  if (parser.parse(json.data(), json.size(), true).get_object().get(root)) return std::nullopt;
  std::optional<std::string_view> binary;
  if (binary_part) binary = *binary_part;

  v2_request out;
  dom::array inputs, outputs;
  dom::element parameters;
  bool has_id = false, has_inputs = false, has_outputs = false, has_parameters = false;
  for (auto field : root) {
    const auto key = field.key;
    bool* seen = key == "id"           ? &has_id
                 : key == "inputs"     ? &has_inputs
                 : key == "outputs"    ? &has_outputs
                 : key == "parameters" ? &has_parameters
                                       : nullptr;
    if (seen == nullptr || *seen) return std::nullopt;
    *seen = true;
    if (key == "id") {
      std::string_view id;
      if (field.value.get_string().get(id)) return std::nullopt;
      out.id = std::string(id);
    } else if (key == "inputs") {
      if (field.value.get_array().get(inputs)) return std::nullopt;
    } else if (key == "outputs") {
      if (field.value.get_array().get(outputs)) return std::nullopt;
    } else {
      parameters = field.value;
    }
  }
  if (!has_inputs || inputs.size() == 0 || inputs.size() > max_list) return std::nullopt;
  for (dom::element e : inputs) {
    dom::object in;
    if (e.get_object().get(in)) return std::nullopt;
    auto t = input(in, binary ? &*binary : nullptr, limits, json.size());
    if (!t) return std::nullopt;
    out.request.inputs.push_back(std::move(*t));
  }
  if (binary && !binary->empty()) return std::nullopt;
  if (has_parameters && !flag_only(parameters, "binary_data_output", out.binary_output))
    return std::nullopt;
  if (has_outputs) {
    if (outputs.size() > max_list) return std::nullopt;
    for (dom::element e : outputs) {
      dom::object o;
      if (e.get_object().get(o) || o.size() == 0 || o.size() > 2) return std::nullopt;
      std::string_view name;
      if (o["name"].get_string().get(name) || name != "output") return std::nullopt;
      out.outputs.emplace_back(name);
      bool binary = out.binary_output;  // the request's default unless the output says
      if (o.size() == 2) {
        auto params = o["parameters"];
        if (params.error() || !flag_only(params.value(), "binary_data", binary))
          return std::nullopt;
      }
      out.output_binary.push_back(binary);
    }
  }
  return out;
}

}  // namespace warm::http
