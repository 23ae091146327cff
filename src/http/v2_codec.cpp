#include "http/v2_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "http/float_text.hpp"
#include "http/v2_elements.hpp"
#include "http/v2_fast.hpp"
#include "http/v2_parse.hpp"
#include "v2/v2_common.hpp"

namespace warm::http {

namespace {

using json = nlohmann::json;

// Deepest container a request needs: body (0) > inputs (1) > tensor (2) > data, nested once per
// tensor dimension beyond the first. More is refused while parsing, before it is built.
constexpr int max_depth = 3 + 32;

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// JSON text of a value. Strings that are not valid UTF-8 (a model name, bytes quoted in a parse
// error's message) get U+FFFD instead of making nlohmann throw type_error 316.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The deepest container nesting in `text`, brackets inside strings ignored. A linear pre-scan is
// several times cheaper than a parser callback on every value (most of a request is numbers).
int nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
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
  bounds.max_tensor_bytes = limits.max_tensor_bytes;
  // Elements of at least a byte: one more than the limit tells "too many".
  bounds.max_untyped_values =
      std::min<std::uint64_t>(bounds.max_untyped_values, limits.max_tensor_bytes + 1);
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

// The tensor bytes of an input's data as `type`: the elements written while parsing (typed), or
// its numbers written now. Each must be representable (v2_elements.hpp); the first that is not is
// named, after booleans where numbers belong (or the reverse) and integers a double does not carry
// exactly where the datatype needs them.
expected<void> pack(data_values& d, dtype type, const std::string& name,
                    std::vector<std::byte>& out) {
  switch (type) {
    case dtype::f32:
    case dtype::f16:
    case dtype::bf16:
    case dtype::f64:
    case dtype::i64:
    case dtype::i32:
    case dtype::i16:
    case dtype::i8:
    case dtype::u64:
    case dtype::u32:
    case dtype::u16:
    case dtype::u8:
    case dtype::boolean:
      break;
    default:
      return bad("input '" + name + "': datatype " + std::string(to_string(type)) +
                 " is not supported");
  }
  const bool booleans = type == dtype::boolean;
  if (booleans && d.booleans != d.count)
    return bad("input '" + name + "': BOOL data must hold true or false");
  if (!booleans && d.booleans != 0)
    return bad("input '" + name + "': data must hold numbers, not boolean");
  if ((type == dtype::i64 || type == dtype::u64) && d.inexact >= 0)
    return bad("input '" + name + "': element " + std::to_string(d.inexact) +
               " is an integer beyond 2^53, which JSON numbers do not carry exactly here; send it "
               "as binary data");
  auto refuse = [&](std::uint64_t i, element_fault fault) {
    return fault == element_fault::not_integer
               ? bad("input '" + name + "': element " + std::to_string(i) + " is not an integer")
               : bad("input '" + name + "': element " + std::to_string(i) + " is out of " +
                     std::string(v2_name(type)) + " range");
  };
  if (d.type) {
    if (d.fault != element_fault::none) return refuse(d.fault_at, d.fault);
    out = std::move(d.bytes);
    return {};
  }
  const auto size = dtype_size(type);
  out.resize(d.values.size() * size);
  for (std::size_t i = 0; i < d.values.size(); ++i)
    if (auto fault = put_element(d.values[i], type, out.data() + i * size);
        fault != element_fault::none)
      return refuse(i, fault);
  return {};
}

// `binary`: the binary part of the body not yet taken by earlier inputs; null without one.
expected<tensor> decode_input(const json& in, std::size_t index, data_values* data,
                              const decode_limits& limits, std::string_view* binary) {
  auto where = "inputs[" + std::to_string(index) + "]";
  if (!in.is_object()) return bad(where + " must be an object");
  auto name = in.find("name");
  if (name == in.end() || !name->is_string())
    return bad(where + ": \"name\" (a string) is required");
  tensor t;
  t.name = name->get<std::string>();
  auto datatype = in.find("datatype");
  if (datatype == in.end() || !datatype->is_string())
    return bad("input '" + t.name + "': \"datatype\" (a string) is required");
  auto type = parse_v2_dtype(datatype->get<std::string>());
  if (!type)
    return bad("input '" + t.name + "': datatype " + dump(*datatype) +
               " is not supported; warm takes FP32, FP16, BF16, FP64, INT64, INT32, INT16, INT8, "
               "UINT8 and BOOL (and "
               "UINT16/32/64)");
  t.type = *type;
  const std::uint64_t element = dtype_size(t.type);
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array())
    return bad("input '" + t.name + "': \"shape\" (an array) is required");
  if (shape->size() > 32) return bad("input '" + t.name + "': shape has more than 32 dimensions");
  std::uint64_t count = 1;
  const std::uint64_t max_count = limits.max_tensor_bytes / element;
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
      return bad("input '" + t.name + "': binary_data_size must be a non-negative integer, not " +
                 dump(size));
    if (data != nullptr && data->present)
      return bad("input '" + t.name + "': has both \"data\" and binary_data_size");
    if (binary == nullptr)
      return bad("input '" + t.name +
                 "': binary_data_size needs the Inference-Header-Content-Length header");
    const auto bytes = size.get<std::uint64_t>();
    if (bytes != count * element)
      return bad("input '" + t.name + "': binary_data_size is " + std::to_string(bytes) +
                 "; shape " + dump(*shape) + " needs " + std::to_string(count * element) +
                 " bytes of " + datatype->get<std::string>());
    if (bytes > binary->size())
      return bad("input '" + t.name + "': binary_data_size is " + std::to_string(bytes) +
                 " but only " + std::to_string(binary->size()) + " bytes of binary data are left");
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
    return bad("input '" + t.name + "': data holds more than the shape's " + std::to_string(count) +
               " elements");
  if (data->count != count)
    return bad("input '" + t.name + "': data holds " + std::to_string(data->count) +
               " elements; shape " + dump(*shape) + " needs " + std::to_string(count));
  if (data->type && (*data->type != t.type || data->expected != count))
    return bad("input '" + t.name +
               "': datatype or shape changed after its data");  // repeated keys refused before
  if (!data->type && data->values.size() < data->count)
    return bad("input '" + t.name + "': data of more than " + std::to_string(data->values.size()) +
               " elements must come after the input's \"shape\" and \"datatype\"");
  if (auto packed = pack(*data, t.type, t.name, t.data); !packed) return std::move(packed).error();
  std::vector<double>().swap(data->values);  // the values live on in the tensor only
  return t;
}

// The most a float takes as written below, with its separator, and the room its writer may
// scribble past the text (float_text.hpp).
constexpr std::size_t max_float_chars = float_text_max + 1;

// Writes `value` at `at` (float_text_room bytes free) and answers the end: the shortest text
// that reads back as the same float (float_text.hpp: std::to_chars's digits, in a third of fmt's
// time), or null for NaN and the infinities, which JSON lacks. Negative zero is "-0.0": JSON
// parsers read "-0" as the integer 0 and lose the sign.
char* write_float(char* at, float value) {
  if (!std::isfinite(value)) return std::copy_n("null", 4, at);
  if (value == 0 && std::signbit(value)) return std::copy_n("-0.0", 4, at);
  return write_shortest(at, value);
}

// Appends `values` (FP32 bytes) as a JSON array's elements, written in place: the string grows
// once by the most they can take (and the writer's scratch room) and is cut back to what they
// took.
void append_floats(std::string& out, const std::vector<std::byte>& values) {
  std::size_t n = values.size() / sizeof(float);
  std::size_t start = out.size();
  out.resize(start + n * max_float_chars + float_text_room);
  char* at = out.data() + start;
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, values.data() + i * sizeof(float), sizeof v);
    if (i) *at++ = ',';
    at = write_float(at, v);
  }
  out.resize(static_cast<std::size_t>(at - out.data()));
}

// Appends a tensor's elements of a type other than FP32 as a JSON array's elements: integers as
// integers, BOOL as true/false, FP16/BF16 through float, FP64 in its shortest round-trip form.
void append_elements(std::string& out, const tensor& t) {
  const auto size = dtype_size(t.type);
  const std::size_t n = size ? t.data.size() / size : 0;
  const std::byte* at = t.data.data();
  char buffer[40];
  for (std::size_t i = 0; i < n; ++i, at += size) {
    if (i) out += ',';
    auto load = [&](auto sample) {
      decltype(sample) v;
      std::memcpy(&v, at, sizeof v);
      return v;
    };
    char* end = buffer;
    switch (t.type) {
      case dtype::f16:
      case dtype::bf16: {
        auto bits = load(std::uint16_t{});
        end = write_float(buffer,
                          t.type == dtype::f16 ? half_to_float(bits) : bfloat16_to_float(bits));
        break;
      }
      case dtype::f64: {
        auto v = load(double{});
        if (!std::isfinite(v))
          end = std::copy_n("null", 4, buffer);
        else if (v == 0 && std::signbit(v))
          end = std::copy_n("-0.0", 4, buffer);
        else
          end = fmt::format_to(buffer, FMT_COMPILE("{}"), v);
        break;
      }
      case dtype::i64:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::int64_t{}));
        break;
      case dtype::i32:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::int32_t{}));
        break;
      case dtype::i16:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::int16_t{}));
        break;
      case dtype::i8:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::int8_t{}));
        break;
      case dtype::u64:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::uint64_t{}));
        break;
      case dtype::u32:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::uint32_t{}));
        break;
      case dtype::u16:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::uint16_t{}));
        break;
      case dtype::u8:
        end = fmt::format_to(buffer, FMT_COMPILE("{}"), load(std::uint8_t{}));
        break;
      case dtype::boolean:
        end =
            load(std::uint8_t{}) ? std::copy_n("true", 4, buffer) : std::copy_n("false", 5, buffer);
        break;
      default:
        end = std::copy_n("null", 4, buffer);
        break;
    }
    out.append(buffer, static_cast<std::size_t>(end - buffer));
  }
}

// A JSON string: printable ASCII without quotes or backslashes as it is (model ids, names),
// anything else through the JSON library's escaping.
void append_string(std::string& out, const std::string& s) {
  bool plain = std::all_of(s.begin(), s.end(),
                           [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
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
      return bad("Inference-Header-Content-Length is " + std::to_string(*json_length) +
                 ", past the body's " + std::to_string(body.size()) + " bytes");
    binary = body.substr(*json_length);
    body = body.substr(0, *json_length);
  }
  const std::string_view* binary_part = binary ? &*binary : nullptr;
  if (auto fast = fast_decode_infer_request(body, binary_part, limits)) return std::move(*fast);
  return decode_infer_request_general(body, binary_part, limits);
}

expected<v2_request> decode_infer_request_general(std::string_view body,
                                                  const std::string_view* binary_part,
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
    if (i < parsed->repeated.size() && !parsed->repeated[i].empty())
      return bad("inputs[" + std::to_string(i) + "]: \"" + parsed->repeated[i] +
                 "\" appears more than once");
    auto t = decode_input((*inputs)[i], i, i < parsed->data.size() ? &parsed->data[i] : nullptr,
                          limits, binary ? &*binary : nullptr);
    if (!t) return std::move(t).error();
    out.request.inputs.push_back(std::move(*t));
  }
  if (binary && !binary->empty())
    return bad(std::to_string(binary->size()) +
               " bytes of binary data are left over after the inputs' binary_data_size");
  auto binary_output = flag(root, "binary_data_output", "request", false);
  if (!binary_output) return std::move(binary_output).error();
  out.binary_output = *binary_output;
  if (auto outputs = root.find("outputs"); outputs != root.end()) {
    if (!outputs->is_array()) return bad("\"outputs\" must be an array");
    for (auto& o : *outputs) {
      auto name = o.is_object() ? o.find("name") : o.end();
      if (!o.is_object() || name == o.end() || !name->is_string())
        return bad("each requested output must be an object with a \"name\"");
      out.outputs.push_back(name->get<std::string>());
      auto binary_data =
          flag(o, "binary_data", "output '" + out.outputs.back() + "'", out.binary_output);
      if (!binary_data) return std::move(binary_data).error();
      out.output_binary.push_back(*binary_data);  // this output's own; the request's default stays
    }
  }
  return out;
}

std::vector<bool> binary_outputs(const v2_request& request, std::size_t outputs) {
  if (!request.outputs.empty()) return request.output_binary;
  return std::vector<bool>(outputs, request.binary_output);
}

std::string encode_infer_response(const infer_result& result, const std::string& id, bool binary,
                                  std::size_t* json_length) {
  return encode_infer_response(result, id, std::vector<bool>(result.outputs.size(), binary),
                               json_length);
}

std::string encode_infer_response(const infer_result& result, const std::string& id,
                                  const std::vector<bool>& binary, std::size_t* json_length) {
  auto is_binary = [&](std::size_t i) { return i < binary.size() && binary[i]; };
  // Room for the whole answer at once (an estimate: a JSON element takes at most
  // max_float_chars, a name is written once), so that it is not copied as it grows.
  std::size_t room = 256 + result.model.size() + id.size();
  for (std::size_t i = 0; i < result.outputs.size(); ++i) {
    const auto& t = result.outputs[i];
    room += 128 + t.name.size() + 24 * t.shape.size();
    const auto size = dtype_size(t.type);
    room += is_binary(i) ? t.data.size()
                         : (size ? t.data.size() / size : 0) * max_float_chars + float_text_room;
  }
  std::string out;
  out.reserve(room);
  out = "{\"model_name\":";
  append_string(out, result.model);
  if (!id.empty()) {
    out += ",\"id\":";
    append_string(out, id);
  }
  out += ",\"parameters\":{\"warm_cache_hit\":";
  out += result.cache_hit ? "true" : "false";
  out += ",\"warm_load_wait_ms\":";
  // A hit waited for nothing: the text the JSON library writes for 0.0, without building a value.
  out += result.load_wait_ms == 0 && !std::signbit(result.load_wait_ms) ? "0.0"
                                                                        : dump(result.load_wait_ms);
  out += "},\"outputs\":[";
  for (std::size_t i = 0; i < result.outputs.size(); ++i) {
    const auto& t = result.outputs[i];
    if (i) out += ',';
    out += "{\"name\":";
    append_string(out, t.name);
    out += ",\"datatype\":\"";
    out += v2_name(t.type);
    out += "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out += ',';
      out += std::to_string(t.shape[d]);
    }
    out += ']';
    if (is_binary(i)) {
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.data.size()) + "}}";
      continue;
    }
    out += ",\"data\":[";
    if (t.type == dtype::f32)
      append_floats(out, t.data);
    else
      append_elements(out, t);
    out += "]}";
  }
  out += "]}";
  if (json_length) *json_length = out.size();
  for (std::size_t i = 0; i < result.outputs.size(); ++i)
    if (is_binary(i))
      out.append(reinterpret_cast<const char*>(result.outputs[i].data.data()),
                 result.outputs[i].data.size());
  return out;
}

namespace {

// A model's tensors as V2 metadata: {"name", "datatype", "shape"}. A tensor the model does not
// declare (a TorchScript model without warm.json) has datatype "" and shape [-1].
json tensor_metadata(const std::vector<tensor_spec>& specs) {
  json list = json::array();
  for (const auto& spec : specs) {
    json shape = json::array();
    if (spec.known)
      for (auto d : spec.shape)
        shape.push_back(d);
    else
      shape.push_back(-1);
    list.push_back({{"name", spec.name},
                    {"datatype", spec.known ? std::string(v2_name(spec.type)) : ""},
                    {"shape", shape}});
  }
  return list;
}

}  // namespace

std::string encode_model_metadata(const std::string& name, const model_metadata& meta,
                                  const std::vector<std::uint64_t>& versions) {
  json listed = json::array();
  for (auto v : versions)
    listed.push_back(std::to_string(v));
  json parameters = {{"warm_model", meta.id},
                     {"warm_bytes", meta.bytes},
                     {"warm_kind", meta.kind},
                     {"warm_batched", meta.io.batched}};
  if (meta.layers) {
    parameters["warm_layers"] = meta.layers;
    parameters["warm_activation"] = meta.activation;
  }
  json body = {
      {"name", name},
      {"versions", std::move(listed)},
      {"platform", meta.kind == "torchscript" ? "pytorch_libtorch" : "warm_" + meta.kind},
      {"inputs", tensor_metadata(meta.io.inputs)},
      {"outputs", tensor_metadata(meta.io.outputs)},
      {"parameters", parameters},
  };
  return dump(body);
}

std::string encode_repository_index(const std::vector<model_status>& models) {
  json list = json::array();
  for (auto& m : models) {
    json entry = {{"name", m.id},
                  {"state", v2::triton_state(m.state)},
                  {"warm_state", std::string(to_string(m.state))}};
    entry["reason"] = m.last_error ? m.last_error->message : "";
    list.push_back(std::move(entry));
  }
  return dump(list);
}

std::string encode_error(std::string_view message) {
  return dump(json{{"error", message}});
}

int http_status(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return 400;
    case errc::not_found:
      return 404;
    case errc::model_too_large:
    case errc::capacity_exhausted:
    case errc::load_failed:
    case errc::unavailable:
      return 503;
    case errc::timeout:
      return 504;
    case errc::internal:
      return 500;
  }
  return 500;
}

}  // namespace warm::http
