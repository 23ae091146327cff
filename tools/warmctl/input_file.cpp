#include "input_file.hpp"

#include <cstdint>
#include <fstream>

#include "tensor_values.hpp"

namespace warm::ctl {
namespace {

using nlohmann::json;

expected<void> bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// The leaves of a nested array, depth first, checking that it is rectangular; its shape into
// `shape` (the caller starts it empty).
expected<void> flatten(const json& node, std::size_t depth, std::vector<std::uint64_t>& shape,
                       std::vector<const json*>& leaves) {
  if (!node.is_array()) {
    if (depth != shape.size()) return bad("input is not a rectangular array");
    leaves.push_back(&node);
    return {};
  }
  if (node.empty()) return bad("input holds an empty array");
  if (depth == shape.size()) {
    if (!leaves.empty()) return bad("input is not a rectangular array");
    shape.push_back(node.size());
  } else if (depth > shape.size() || shape[depth] != node.size()) {
    return bad("input is not a rectangular array");
  }
  for (const auto& child : node)
    if (auto ok = flatten(child, depth + 1, shape, leaves); !ok) return ok;
  return {};
}

// "data" of an object, flat or nested, in row-major order (its own shape is not checked: the
// count of values against "shape" is).
void leaves_of(const json& node, std::vector<const json*>& leaves) {
  if (!node.is_array()) {
    leaves.push_back(&node);
    return;
  }
  for (const auto& child : node)
    leaves_of(child, leaves);
}

expected<void> append_all(tensor& t, const std::vector<const json*>& leaves) {
  t.data.reserve(leaves.size() * dtype_size(t.type));
  for (const auto* leaf : leaves)
    if (auto ok = append_element(t, *leaf); !ok) return ok;
  return {};
}

expected<dtype> dtype_named(const json& name) {
  if (name.is_string()) {
    auto text = name.get<std::string>();
    if (auto type = parse_dtype(text)) return *type;
    if (auto type = parse_v2_dtype(text)) return *type;
  }
  return make_error(errc::invalid_argument,
                    "unknown dtype " + name.dump() +
                        " (F32, F64, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, "
                        "U64, U32, U16, U8, BOOL, or KServe V2's FP32, INT64, ...)");
}

// One tensor from {"name", "dtype", "shape", "data"}.
expected<tensor> object_tensor(const json& doc) {
  tensor t;
  if (doc.contains("name")) {
    if (!doc["name"].is_string())
      return make_error(errc::invalid_argument, "\"name\" is not a string");
    t.name = doc["name"].get<std::string>();
  }
  const std::string which = t.name.empty() ? "input" : "input '" + t.name + "'";
  auto fail = [&](const std::string& message) {
    return make_error(errc::invalid_argument, which + ": " + message);
  };
  const char* type_key = doc.contains("dtype")      ? "dtype"
                         : doc.contains("datatype") ? "datatype"
                                                    : nullptr;
  if (type_key) {
    auto type = dtype_named(doc[type_key]);
    if (!type) return fail(type.error().message);
    t.type = *type;
  }
  if (!doc.contains("shape") || !doc.contains("data") || !doc["shape"].is_array() ||
      !doc["data"].is_array())
    return fail("an object needs \"shape\" and \"data\" arrays");
  std::uint64_t elements = 1;
  for (const auto& d : doc["shape"]) {
    if (!d.is_number_unsigned()) return fail("shape holds a non-integer");
    t.shape.push_back(d.get<std::uint64_t>());
    if (t.shape.back() != 0 && elements > UINT64_MAX / t.shape.back())
      return fail("shape is too large");
    elements *= t.shape.back();
  }
  std::vector<const json*> leaves;
  leaves_of(doc["data"], leaves);
  if (elements != leaves.size())
    return fail("shape holds " + std::to_string(elements) + " values but data has " +
                std::to_string(leaves.size()));
  if (auto ok = append_all(t, leaves); !ok) return fail(ok.error().message);
  return t;
}

}  // namespace

expected<std::vector<tensor>> parse_input(const json& doc) {
  std::vector<tensor> tensors;
  if (doc.is_object() && doc.contains("inputs")) {
    if (!doc["inputs"].is_array() || doc["inputs"].empty())
      return make_error(errc::invalid_argument, "\"inputs\" is not a list of input objects");
    for (const auto& item : doc["inputs"]) {
      if (!item.is_object())
        return make_error(errc::invalid_argument, "\"inputs\" holds a non-object");
      auto t = object_tensor(item);
      if (!t) return t.error();
      tensors.push_back(std::move(*t));
    }
    return tensors;
  }
  if (doc.is_object()) {
    auto t = object_tensor(doc);
    if (!t) return t.error();
    tensors.push_back(std::move(*t));
    return tensors;
  }
  tensor t;  // unnamed F32: the model's single input
  std::vector<const json*> leaves;
  if (auto ok = flatten(doc, 0, t.shape, leaves); !ok) return ok.error();
  if (auto ok = append_all(t, leaves); !ok)
    return make_error(errc::invalid_argument, "input: " + ok.error().message);
  tensors.push_back(std::move(t));
  return tensors;
}

expected<std::vector<tensor>> read_input_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read '" + path + "'");
  auto doc = json::parse(in, nullptr, false);
  if (doc.is_discarded())
    return make_error(errc::invalid_argument, "'" + path + "' is not valid JSON");
  auto tensors = parse_input(doc);
  if (!tensors)
    return make_error(errc::invalid_argument, "'" + path + "': " + tensors.error().message);
  return tensors;
}

expected<void> apply_batch(tensor& t, std::uint64_t batch) {
  if (batch == 0) return {};
  if (t.shape.size() == 1) {
    std::vector<std::byte> rows;
    rows.reserve(t.data.size() * batch);
    for (std::uint64_t i = 0; i < batch; ++i)
      rows.insert(rows.end(), t.data.begin(), t.data.end());
    t.data = std::move(rows);
    t.shape.insert(t.shape.begin(), batch);
    return {};
  }
  if (t.shape.empty() || t.shape[0] != batch) {
    auto which = t.name.empty() ? std::string("the input") : "input '" + t.name + "'";
    return make_error(
        errc::invalid_argument,
        "--batch " + std::to_string(batch) + " does not match the first dimension of " + which);
  }
  return {};
}

}  // namespace warm::ctl
