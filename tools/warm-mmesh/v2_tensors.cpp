#include "v2_tensors.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

#include "warm/safetensors.hpp"

namespace warm::mmesh {
namespace {

error internal_error(const std::string& model_id, const std::string& what) {
  return make_error(errc::internal, model_id + ": the runtime answered " + what);
}

// Whether `name` may name a tensor: 1..max_name_bytes bytes, no NUL.
bool good_name(const std::string& name) {
  return !name.empty() && name.size() <= max_name_bytes && name.find('\0') == std::string::npos;
}

// The bytes a tensor of `shape` (each dimension >= 0) and `type` holds, its element count in
// `elements`; nullopt past max_tensor_bytes (overflow included).
std::optional<std::uint64_t> bytes_of(const google::protobuf::RepeatedField<std::int64_t>& shape,
                                      dtype type, std::uint64_t& elements) {
  // Each 0 dimension is taken as 1 for the bound, so that a 0 does not hide a huge shape.
  const std::uint64_t size = dtype_size(type);
  std::uint64_t count = 1, bound = 1;
  for (auto d : shape) {
    if (d < 0) return std::nullopt;
    const auto dim = std::max<std::uint64_t>(static_cast<std::uint64_t>(d), 1);
    if (bound > max_tensor_bytes / size / dim) return std::nullopt;
    bound *= dim;
    count *= static_cast<std::uint64_t>(d);
  }
  elements = count;
  return count * size;
}

// Appends `values` converted to T (little-endian, as this machine is) to `out`; false when a
// value does not fit T.
template <typename T, typename Values>
bool append_as(const Values& values, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  out.resize(at + values.size() * sizeof(T));
  auto* p = out.data() + at;
  for (const auto& v : values) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, V>) {
      if constexpr (std::is_signed_v<V>) {
        if (v < static_cast<V>(std::numeric_limits<T>::min())) return false;
      }
      if (v > static_cast<V>(std::numeric_limits<T>::max())) return false;
    }
    const T x = static_cast<T>(v);
    std::memcpy(p, &x, sizeof(T));
    p += sizeof(T);
  }
  return true;
}

// The typed contents of one output as raw bytes; `elements` values expected. An error message
// (after "the runtime answered ") when they do not fit.
std::optional<std::string> typed_bytes(const inference::InferTensorContents& c, dtype type,
                                       std::uint64_t elements, std::vector<std::byte>& out) {
  auto take = [&](const auto& values, auto tag) -> std::optional<std::string> {
    using T = decltype(tag);
    if (static_cast<std::uint64_t>(values.size()) != elements)
      return std::to_string(values.size()) + " values for " + std::to_string(elements) +
             " elements";
    out.reserve(elements * sizeof(T));
    if (!append_as<T>(values, out)) return std::string("a value out of its datatype's range");
    return std::nullopt;
  };
  switch (type) {
    case dtype::boolean: {
      if (static_cast<std::uint64_t>(c.bool_contents_size()) != elements)
        return std::to_string(c.bool_contents_size()) + " values for " + std::to_string(elements) +
               " elements";
      out.reserve(elements);
      for (bool b : c.bool_contents())
        out.push_back(std::byte{b ? std::uint8_t{1} : std::uint8_t{0}});
      return std::nullopt;
    }
    case dtype::i8:
      return take(c.int_contents(), std::int8_t{});
    case dtype::i16:
      return take(c.int_contents(), std::int16_t{});
    case dtype::i32:
      return take(c.int_contents(), std::int32_t{});
    case dtype::i64:
      return take(c.int64_contents(), std::int64_t{});
    case dtype::u8:
      return take(c.uint_contents(), std::uint8_t{});
    case dtype::u16:
      return take(c.uint_contents(), std::uint16_t{});
    case dtype::u32:
      return take(c.uint_contents(), std::uint32_t{});
    case dtype::u64:
      return take(c.uint64_contents(), std::uint64_t{});
    case dtype::f32:
      return take(c.fp32_contents(), float{});
    case dtype::f64:
      return take(c.fp64_contents(), double{});
    default:
      if (elements == 0) return std::nullopt;
      return std::string(to_string(type)) + " values without raw contents (V2 has no typed field)";
  }
}

// One side's tensors from the metadata, into `out`; `side` is "input" or "output".
expected<void> read_side(
    const std::string& model_id, const char* side,
    const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>&
        specs,
    std::vector<tensor_spec>& out, std::set<std::string>& names, bool& batched) {
  auto refuse = [&](const std::string& what) {
    return make_error(errc::invalid_argument, model_id + ": the runtime declares " + what);
  };
  if (specs.empty()) return refuse(std::string("no ") + side + "s");
  if (static_cast<std::size_t>(specs.size()) > max_tensors)
    return refuse(std::to_string(specs.size()) + " " + side + "s (at most " +
                  std::to_string(max_tensors) + ")");
  for (const auto& m : specs) {
    if (!good_name(m.name()))
      return refuse(std::string("an ") + side + " named '" + bounded_text(m.name(), 64) +
                    "' (a name is 1 to " + std::to_string(max_name_bytes) + " bytes)");
    if (!names.insert(std::string(side) + ":" + m.name()).second)
      return refuse(std::string(side) + " '" + m.name() + "' twice");
    auto type = dtype_from_v2(m.datatype());
    if (!type)
      return refuse(std::string(side) + " '" + m.name() + "' as " + bounded_text(m.datatype(), 32) +
                    ", which warm does not carry");
    if (static_cast<std::size_t>(m.shape_size()) > max_rank)
      return refuse(std::string(side) + " '" + m.name() + "' of rank " +
                    std::to_string(m.shape_size()) + " (at most " + std::to_string(max_rank) + ")");
    tensor_spec spec;
    spec.name = m.name();
    spec.type = *type;
    for (auto d : m.shape()) {
      if (d < -1)
        return refuse(std::string(side) + " '" + m.name() + "' with dimension " +
                      std::to_string(d));
      spec.shape.push_back(d);
    }
    if (spec.shape.empty() || spec.shape.front() != -1) batched = false;
    out.push_back(std::move(spec));
  }
  return {};
}

}  // namespace

std::optional<dtype> dtype_from_v2(std::string_view v2) {
  if (v2 == "BYTES") return std::nullopt;
  return parse_v2_dtype(v2);
}

std::string_view dtype_to_v2(dtype type) {
  return v2_name(type);
}

std::string bounded_text(std::string_view text, std::size_t max) {
  std::string out;
  out.reserve(std::min(text.size(), max));
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80         ? 1
                      : (c >> 5) == 6  ? 2
                      : (c >> 4) == 14 ? 3
                      : (c >> 3) == 30 ? 4
                                       : 0;
    bool valid = len != 0 && i + len <= text.size();
    for (std::size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (!valid) len = 1;
    if (out.size() + (valid ? len : 1) > max) break;
    if (!valid || (len == 1 && (c < 0x20 || c == 0x7F)))
      out += c == '\n' || c == '\t' ? ' ' : '?';
    else
      out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

expected<model_io> io_from_metadata(const std::string& model_id,
                                    const inference::ModelMetadataResponse& metadata) {
  model_io io;
  bool batched = true;
  std::set<std::string> names;
  auto in = read_side(model_id, "input", metadata.inputs(), io.inputs, names, batched);
  if (!in) return std::move(in).error();
  auto out = read_side(model_id, "output", metadata.outputs(), io.outputs, names, batched);
  if (!out) return std::move(out).error();
  io.batched = batched;
  return io;
}

expected<void> fill_infer_request(const std::string& model_id, std::vector<tensor>&& inputs,
                                  inference::ModelInferRequest& out) {
  out.set_model_name(model_id);
  for (auto& t : inputs) {
    auto v2 = dtype_to_v2(t.type);
    if (v2.empty())
      return make_error(errc::invalid_argument, model_id + ": input '" + t.name + "' is " +
                                                    std::string(to_string(t.type)) +
                                                    ", which KServe V2 cannot carry");
    auto* in = out.add_inputs();
    in->set_name(t.name);
    in->set_datatype(std::string(v2));
    for (auto d : t.shape) {
      if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return make_error(errc::invalid_argument,
                          model_id + ": input '" + t.name + "' has a dimension past INT64_MAX");
      in->add_shape(static_cast<std::int64_t>(d));
    }
    auto* raw = out.add_raw_input_contents();
    raw->assign(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    std::vector<std::byte>().swap(t.data);
  }
  return {};
}

expected<std::vector<tensor>> read_infer_response(const std::string& model_id,
                                                  const inference::ModelInferResponse& answer) {
  const auto n = static_cast<std::size_t>(answer.outputs_size());
  if (n > max_tensors)
    return internal_error(
        model_id, std::to_string(n) + " outputs (at most " + std::to_string(max_tensors) + ")");
  const auto raw_n = static_cast<std::size_t>(answer.raw_output_contents_size());
  if (raw_n != 0 && raw_n != n)
    return internal_error(
        model_id, std::to_string(raw_n) + " raw contents for " + std::to_string(n) + " outputs");
  std::vector<tensor> outputs;
  outputs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& o = answer.outputs(static_cast<int>(i));
    if (!good_name(o.name()))
      return internal_error(model_id, "output " + std::to_string(i) + " with a bad name '" +
                                          bounded_text(o.name(), 64) + "'");
    const std::string label = "output '" + o.name() + "'";
    auto type = dtype_from_v2(o.datatype());
    if (!type)
      return internal_error(model_id, label + " as " + bounded_text(o.datatype(), 32) +
                                          ", which warm does not carry");
    if (static_cast<std::size_t>(o.shape_size()) > max_rank)
      return internal_error(model_id, label + " of rank " + std::to_string(o.shape_size()));
    std::uint64_t elements = 0;
    auto bytes = bytes_of(o.shape(), *type, elements);
    if (!bytes)
      return internal_error(model_id, label + " with a negative dimension or past " +
                                          std::to_string(max_tensor_bytes) + " bytes");
    tensor t;
    t.name = o.name();
    t.type = *type;
    for (auto d : o.shape())
      t.shape.push_back(static_cast<std::uint64_t>(d));
    if (raw_n != 0) {
      const auto& raw = answer.raw_output_contents(static_cast<int>(i));
      if (raw.size() != *bytes)
        return internal_error(model_id, label + " of " + std::to_string(raw.size()) +
                                            " bytes where its shape makes " +
                                            std::to_string(*bytes));
      t.data.resize(raw.size());
      std::memcpy(t.data.data(), raw.data(), raw.size());
    } else if (auto bad = typed_bytes(o.contents(), *type, elements, t.data)) {
      return internal_error(model_id, label + " with " + *bad);
    }
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace warm::mmesh
