#include "warm/dense_model.hpp"

#include "storage/file.hpp"
#include "storage/located_file.hpp"
#include "storage/safetensors_file.hpp"

#include <algorithm>
#include <set>

namespace warm {
namespace {

constexpr std::string_view kind_key = "warm.kind";
constexpr std::string_view activation_key = "warm.activation";

// Parses "layers.<i>.weight" / "layers.<i>.bias" into (i, is_weight); nullopt otherwise.
// Indices are plain decimal without leading zeros, so each layer has exactly one spelling.
std::optional<std::pair<std::uint64_t, bool>> parse_layer_name(std::string_view name) {
  constexpr std::string_view prefix = "layers.";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  auto dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return std::nullopt;
  auto digits = name.substr(0, dot);
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  std::uint64_t index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + static_cast<std::uint64_t>(c - '0');
  }
  auto role = name.substr(dot + 1);
  if (role == "weight") return std::make_pair(index, true);
  if (role == "bias") return std::make_pair(index, false);
  return std::nullopt;
}

}  // namespace

std::string_view to_string(activation act) noexcept {
  switch (act) {
    case activation::none:
      return "none";
    case activation::relu:
      return "relu";
    case activation::gelu:
      return "gelu";
    case activation::tanh:
      return "tanh";
  }
  return "none";
}

std::optional<activation> parse_activation(std::string_view name) noexcept {
  for (auto act : {activation::none, activation::relu, activation::gelu, activation::tanh})
    if (to_string(act) == name) return act;
  return std::nullopt;
}

std::uint64_t dense_spec::widest() const {
  std::uint64_t w = 0;
  for (const auto& l : layers)
    w = std::max({w, l.in, l.out});
  return w;
}

std::uint64_t dense_spec::parameters() const {
  std::uint64_t n = 0;
  for (const auto& l : layers)
    n += l.out * l.in + l.out;
  return n;
}

expected<dense_spec> dense_spec_from(const safetensors_header& header) {
  auto kind = header.metadata.find(std::string(kind_key));
  if (kind == header.metadata.end())
    return invalid_input("__metadata__ has no \"warm.kind\" (not a warm model)");
  if (kind->second != "dense")
    return invalid_input("unsupported model kind '" + kind->second + "' (expected dense)");
  auto act_name = header.metadata.find(std::string(activation_key));
  if (act_name == header.metadata.end())
    return invalid_input("__metadata__ has no \"warm.activation\"");
  auto act = parse_activation(act_name->second);
  if (!act)
    return invalid_input("unknown activation '" + act_name->second +
                         "' (expected relu, gelu, tanh or none)");

  // Index every tensor by layer; anything that is not a layer tensor is an error.
  std::vector<const tensor_info*> weights, biases;
  for (const auto& t : header.tensors) {
    auto parsed = parse_layer_name(t.name);
    if (!parsed) return invalid_input("unexpected tensor '" + t.name + "' in a dense model");
    auto [index, is_weight] = *parsed;
    if (index >= header.tensors.size())
      return invalid_input("tensor '" + t.name + "': layer index out of sequence");
    auto& slots = is_weight ? weights : biases;
    if (slots.size() <= index) slots.resize(index + 1, nullptr);
    slots[index] = &t;  // duplicates are impossible: the parser rejects repeated names
  }
  if (weights.empty()) return invalid_input("dense model has no layers");
  if (biases.size() > weights.size())
    return invalid_input("layer " + std::to_string(biases.size() - 1) +
                         " has a bias but no weight");

  dense_spec spec;
  spec.activation = *act;
  spec.data_bytes = header.data_bytes;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    auto layer = "layer " + std::to_string(i);
    const tensor_info* w = weights[i];
    const tensor_info* b = i < biases.size() ? biases[i] : nullptr;
    if (!w)
      return invalid_input(layer + ": missing tensor 'layers." + std::to_string(i) + ".weight'");
    if (!b)
      return invalid_input(layer + ": missing tensor 'layers." + std::to_string(i) + ".bias'");
    if (w->dtype != dtype::f32 || b->dtype != dtype::f32)
      return invalid_input(layer + ": dtype " +
                           std::string(to_string(w->dtype != dtype::f32 ? w->dtype : b->dtype)) +
                           " is not supported (dense models are F32)");
    if (w->shape.size() != 2) return invalid_input(layer + ": weight must have shape [out, in]");
    if (b->shape.size() != 1) return invalid_input(layer + ": bias must have shape [out]");
    dense_layer l{w->shape[1], w->shape[0], w->begin, b->begin};
    if (l.in == 0 || l.out == 0) return invalid_input(layer + ": has a zero dimension");
    if (l.in > max_dense_width || l.out > max_dense_width)
      return invalid_input(layer + ": dimension exceeds " + std::to_string(max_dense_width));
    if (b->shape[0] != l.out)
      return invalid_input(layer + ": bias has " + std::to_string(b->shape[0]) +
                           " entries but the weight has " + std::to_string(l.out) + " outputs");
    if (!spec.layers.empty() && spec.layers.back().out != l.in)
      return invalid_input(layer + ": takes " + std::to_string(l.in) + " inputs but layer " +
                           std::to_string(i - 1) + " produces " +
                           std::to_string(spec.layers.back().out) + " (layers do not chain)");
    spec.layers.push_back(l);
  }
  return spec;
}

expected<model_file> open_model_file(const model_location& where) {
  auto file = open_located(where);
  if (!file) return std::move(file).error();
  auto header = read_safetensors_header(*file);
  if (!header) return std::move(header).error();
  auto spec = dense_spec_from(*header);
  if (!spec) return make_error(spec.error().code, where.path + ": " + spec.error().message);
  return model_file{where.path, std::move(*header), std::move(*spec),
                    std::make_shared<const read_file>(std::move(*file))};
}

expected<model_file> open_model_file(const std::string& path) {
  return open_model_file(model_location::unconfined(path));
}

}  // namespace warm
