#include "warm/model_io.hpp"

#include <algorithm>
#include <cstring>

namespace warm {
namespace {

struct v2_entry {
  dtype type;
  std::string_view name;
};

constexpr v2_entry v2_table[] = {
    {dtype::f32, "FP32"},     {dtype::f16, "FP16"},   {dtype::bf16, "BF16"},
    {dtype::f64, "FP64"},     {dtype::i64, "INT64"},  {dtype::i32, "INT32"},
    {dtype::i16, "INT16"},    {dtype::i8, "INT8"},    {dtype::u8, "UINT8"},
    {dtype::u16, "UINT16"},   {dtype::u32, "UINT32"}, {dtype::u64, "UINT64"},
    {dtype::boolean, "BOOL"},
};

expected<std::uint64_t> bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "F32 (FP32)": a dtype by warm's name and, where V2 has one, by V2's.
std::string type_text(dtype type) {
  auto v2 = v2_name(type);
  return std::string(to_string(type)) + (v2.empty() ? "" : " (" + std::string(v2) + ")");
}

std::string names_of(const std::vector<tensor_spec>& specs) {
  std::string s;
  for (const auto& spec : specs)
    s += (s.empty() ? "'" : ", '") + spec.name + "'";
  return s;
}

// The bytes a tensor of `shape` and `type` holds, or nullopt past 2^62 (no request is that big).
std::optional<std::uint64_t> bytes_of(const std::vector<std::uint64_t>& shape, dtype type) {
  constexpr std::uint64_t limit = std::uint64_t{1} << 62;
  std::uint64_t n = dtype_size(type);
  for (auto d : shape) {
    if (d != 0 && n > limit / d) return std::nullopt;
    n *= d;
  }
  return n;
}

}  // namespace

std::string_view v2_name(dtype type) noexcept {
  for (const auto& e : v2_table)
    if (e.type == type) return e.name;
  return {};
}

std::optional<dtype> parse_v2_dtype(std::string_view name) noexcept {
  for (const auto& e : v2_table)
    if (e.name == name) return e.type;
  return std::nullopt;
}

namespace {

std::uint64_t single_width(const model_io& io, const std::vector<tensor_spec>& side) {
  if (!io.batched || io.inputs.size() != 1 || io.outputs.size() != 1) return 0;
  const auto& t = side.front();
  if (!t.known || t.shape.size() != 2 || t.shape[1] < 0) return 0;
  return static_cast<std::uint64_t>(t.shape[1]);
}

}  // namespace

std::uint64_t input_width(const model_io& io) {
  return single_width(io, io.inputs);
}
std::uint64_t output_width(const model_io& io) {
  return single_width(io, io.outputs);
}

std::uint16_t float_to_half(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // a subnormal half (or zero): shift the full significand, round to even
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14 .. 24
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1);  // round to nearest even at bit 13
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float half_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu, x;
  if (exponent == 0x1f) {
    x = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    x = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    x = sign;
  } else {  // subnormal: normalize
    exponent = 113;
    while (!(mantissa & 0x400u))
      mantissa <<= 1, --exponent;
    x = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::uint16_t float_to_bfloat16(float value) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

float bfloat16_to_float(std::uint16_t bits) noexcept {
  std::uint32_t x = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::string describe(const tensor_spec& spec) {
  if (!spec.known) return spec.name + " (any)";
  std::string s = spec.name + " " + std::string(to_string(spec.type)) + " [";
  for (std::size_t i = 0; i < spec.shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(spec.shape[i]);
  return s + "]";
}

namespace {

// Of more inputs than a model takes, the one too many: ": 'x' is not one of them", ": 'x' twice" or
// ", all unnamed"; empty when it cannot be told (some inputs unnamed, the others right).
std::string extra_input(const std::vector<tensor>& inputs, const std::vector<tensor_spec>& specs) {
  for (const auto& t : inputs) {
    bool known = std::any_of(specs.begin(), specs.end(),
                             [&](const tensor_spec& s) { return s.name == t.name; });
    if (!known && !t.name.empty()) return ": '" + t.name + "' is not one of them";
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (!inputs[i].name.empty() && inputs[i].name == inputs[j].name)
        return ": '" + inputs[i].name + "' twice";
  auto unnamed =
      std::count_if(inputs.begin(), inputs.end(), [](const tensor& t) { return t.name.empty(); });
  return unnamed == static_cast<std::ptrdiff_t>(inputs.size()) ? ", all unnamed" : "";
}

}  // namespace

expected<std::uint64_t> check_inputs(std::vector<tensor>& inputs, const model_io& io,
                                     std::uint64_t max_batch) {
  const auto& specs = io.inputs;
  if (inputs.size() != specs.size())
    return bad("the model takes " + std::to_string(specs.size()) + " input tensor" +
               (specs.size() == 1 ? " (" : "s (") + names_of(specs) + "); got " +
               std::to_string(inputs.size()) +
               (inputs.size() > specs.size() ? extra_input(inputs, specs) : ""));
  if (specs.size() == 1 && inputs.front().name.empty()) inputs.front().name = specs.front().name;
  // Into the model's order, each name matched once.
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto it = std::find_if(inputs.begin() + static_cast<std::ptrdiff_t>(i), inputs.end(),
                           [&](const tensor& t) { return t.name == specs[i].name; });
    if (it == inputs.end()) {
      for (std::size_t j = i; j < inputs.size(); ++j) {
        auto known = std::any_of(specs.begin(), specs.end(),
                                 [&](const tensor_spec& s) { return s.name == inputs[j].name; });
        if (!known)
          return bad("unknown input tensor '" + inputs[j].name + "'; the model's input" +
                     (specs.size() == 1 ? " is " : "s are ") + names_of(specs));
      }
      return bad("input '" + specs[i].name + "' is given twice or not at all");
    }
    std::iter_swap(inputs.begin() + static_cast<std::ptrdiff_t>(i), it);
  }
  std::uint64_t batch = 1;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto& t = inputs[i];
    const auto& spec = specs[i];
    if (spec.known) {
      if (t.type != spec.type)  // both names: warm's (Cap'n Proto, embedding) and KServe V2's
        return bad("input '" + t.name + "' must be " + type_text(spec.type) + ", not " +
                   type_text(t.type));
      if (io.batched && t.shape.size() + 1 == spec.shape.size()) t.shape.insert(t.shape.begin(), 1);
      if (t.shape.size() != spec.shape.size())
        return bad("input '" + t.name + "' must have rank " + std::to_string(spec.shape.size()) +
                   " (" + describe(spec) + "); got rank " + std::to_string(t.shape.size()));
      for (std::size_t d = 0; d < spec.shape.size(); ++d)
        if (spec.shape[d] >= 0 && t.shape[d] != static_cast<std::uint64_t>(spec.shape[d]))
          return bad("input '" + t.name + "' has shape " + shape_text(t.shape) +
                     "; the model takes " + describe(spec));
    }
    if (io.batched) {  // checked from the shape, before the data is looked at
      if (t.shape.empty()) return bad("input '" + t.name + "' needs a batch dimension");
      if (i == 0) {
        batch = t.shape.front();
        if (batch == 0) return bad("batch must be at least 1");
        if (batch > max_batch)
          return bad("batch of " + std::to_string(batch) +
                     " is too large for this model; it takes at most " + std::to_string(max_batch) +
                     " rows");
      }
      if (t.shape.front() != batch)
        return bad("inputs disagree on the batch: '" + inputs.front().name + "' has " +
                   std::to_string(batch) + " rows, '" + t.name + "' " +
                   std::to_string(t.shape.front()));
    }
    auto bytes = bytes_of(t.shape, t.type);
    if (!bytes)
      return bad("input '" + t.name + "' of shape " + shape_text(t.shape) + " is too large");
    if (t.data.size() != *bytes)
      return bad("input '" + t.name + "' holds " + std::to_string(t.data.size()) +
                 " bytes; shape " + shape_text(t.shape) + " of " + std::string(to_string(t.type)) +
                 " needs " + std::to_string(*bytes));
  }
  return batch;
}

namespace {

expected<void> wrong_output(std::string message) {
  return make_error(errc::internal, std::move(message));
}

// An output's name for messages: its declared name, else (undeclared) its own, cut short.
std::string output_name(const std::vector<tensor>& outputs, const model_io& io, std::size_t i) {
  if (i < io.outputs.size()) return io.outputs[i].name;
  const auto& own = outputs[i].name;
  return own.size() <= 64 ? own : own.substr(0, 64) + "...";
}

}  // namespace

expected<void> check_outputs(const std::vector<tensor>& outputs, const model_io& io,
                             std::uint64_t batch) {
  const auto& specs = io.outputs;
  if (!specs.empty() && outputs.size() != specs.size())
    return wrong_output(std::to_string(outputs.size()) + " output" +
                        (outputs.size() == 1 ? "" : "s") + "; the model declares " +
                        std::to_string(specs.size()) + " (" + names_of(specs) + ")");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& t = outputs[i];
    // Named only when refused: this runs on every inference, the cache-hit path included.
    auto name = [&] { return "output '" + output_name(outputs, io, i) + "'"; };
    if (i < specs.size() && specs[i].known) {
      const auto& spec = specs[i];
      if (t.type != spec.type)
        return wrong_output(name() + " of " + std::string(to_string(t.type)) +
                            "; the model declares " + describe(spec));
      if (t.shape.size() != spec.shape.size())
        return wrong_output(name() + " of rank " + std::to_string(t.shape.size()) +
                            "; the model declares " + describe(spec));
      for (std::size_t d = 0; d < spec.shape.size(); ++d)
        if (spec.shape[d] >= 0 && t.shape[d] != static_cast<std::uint64_t>(spec.shape[d]))
          return wrong_output(name() + " of shape " + shape_text(t.shape) +
                              "; the model declares " + describe(spec));
    }
    if (io.batched) {
      if (t.shape.empty())
        return wrong_output(name() + " without a batch dimension for a batch of " +
                            std::to_string(batch));
      if (t.shape.front() != batch)
        return wrong_output(name() + " of " + std::to_string(t.shape.front()) + " row" +
                            (t.shape.front() == 1 ? "" : "s") + " for a batch of " +
                            std::to_string(batch));
    }
    auto bytes = bytes_of(t.shape, t.type);
    if (!bytes || t.data.size() != *bytes)
      return wrong_output(name() + " of " + std::to_string(t.data.size()) + " bytes; its shape " +
                          shape_text(t.shape) + " of " + std::string(to_string(t.type)) +
                          " needs " +
                          (bytes ? std::to_string(*bytes) : std::string("more than 2^62")));
  }
  return {};
}

}  // namespace warm
