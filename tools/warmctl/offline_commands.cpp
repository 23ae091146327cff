#include "offline_commands.hpp"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "format.hpp"
#include "warm/dense_model.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/units.hpp"

namespace warm::ctl {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

nlohmann::ordered_json info_json(const model_file& model) {
  const auto& spec = model.spec;
  nlohmann::ordered_json layers = nlohmann::json::array(), tensors = nlohmann::json::array();
  for (const auto& l : spec.layers)
    layers.push_back({{"in", l.in}, {"out", l.out}});
  for (const auto& t : model.header.tensors)
    tensors.push_back({{"name", t.name},
                       {"dtype", to_string(t.dtype)},
                       {"shape", t.shape},
                       {"bytes", t.bytes()}});
  return {
      {"path", model.path},
      {"kind", "dense"},
      {"activation", to_string(spec.activation)},
      {"layers", layers},
      {"input", {{"name", "input"}, {"dtype", "F32"}, {"shape", {-1, spec.input_width()}}}},
      {"output", {{"name", "output"}, {"dtype", "F32"}, {"shape", {-1, spec.output_width()}}}},
      {"parameters", spec.parameters()},
      {"bytes", spec.data_bytes},
      {"file_bytes", model.header.data_offset + model.header.data_bytes},
      {"metadata", model.header.metadata},
      {"tensors", tensors},
  };
}

void print_info(const model_file& model) {
  const auto& spec = model.spec;
  std::string chain = std::to_string(spec.input_width());
  for (const auto& l : spec.layers)
    chain += " -> " + std::to_string(l.out);
  std::printf("path:        %s\n", model.path.c_str());
  std::printf("kind:        dense\n");
  std::printf("activation:  %s\n", std::string(to_string(spec.activation)).c_str());
  std::printf("layers:      %s\n", chain.c_str());
  std::printf("input:       input F32 [batch, %llu]\n",
              static_cast<unsigned long long>(spec.input_width()));
  std::printf("output:      output F32 [batch, %llu]\n",
              static_cast<unsigned long long>(spec.output_width()));
  std::printf("parameters:  %llu\n", static_cast<unsigned long long>(spec.parameters()));
  std::printf("bytes:       %llu (%s on a device)\n",
              static_cast<unsigned long long>(spec.data_bytes),
              format_bytes(spec.data_bytes).c_str());
  std::size_t width = 4;
  for (const auto& t : model.header.tensors)
    width = std::max(width, t.name.size());
  std::printf("\n%-*s  %-5s  %-14s  %s\n", static_cast<int>(width), "NAME", "DTYPE", "SHAPE",
              "BYTES");
  for (const auto& t : model.header.tensors)
    std::printf("%-*s  %-5s  %-14s  %llu\n", static_cast<int>(width), t.name.c_str(),
                std::string(to_string(t.dtype)).c_str(), shape_text(t.shape).c_str(),
                static_cast<unsigned long long>(t.bytes()));
}

}  // namespace

void add_offline_commands(CLI::App& app, bool& json, int& exit_code) {
  auto* info = app.add_subcommand("model-info",
                                  "Validate a model file or directory and describe it (offline)");
  auto path = std::make_shared<std::string>();
  auto version = std::make_shared<std::uint64_t>(0);
  info->add_option("PATH", *path, "A .safetensors file, a version directory or a model directory")
      ->required();
  info->add_option("--version", *version,
                   "Version to pick in a model directory (default: the highest)");
  info->add_flag("--json", json, "Print one JSON document");
  info->callback([&json, &exit_code, path, version] {
    auto file =
        find_model_file(*path, *version ? std::optional<std::uint64_t>(*version) : std::nullopt);
    auto model = file ? open_model_file(*file) : expected<model_file>(file.error());
    if (!model) {
      std::cerr << "warmctl: invalid model: " << model.error().message << "\n";
      exit_code = exit_usage;
      return;
    }
    if (json)
      std::cout << dump_json(info_json(*model), 2) << "\n";
    else
      print_info(*model);
    exit_code = exit_ok;
  });

  auto* make =
      app.add_subcommand("make-model", "Write a dense model with seeded random weights (offline)");
  auto out = std::make_shared<std::string>();
  auto layers = std::make_shared<std::string>();
  auto seed = std::make_shared<std::uint64_t>(1);
  auto act = std::make_shared<std::string>("relu");
  make->add_option("--out", *out, "Directory to write model.safetensors into (created if missing)")
      ->required();
  make->add_option("--layers", *layers, "Layer widths, input first: e.g. 784,512,10")->required();
  make->add_option("--seed", *seed, "Seed of the random weights")->capture_default_str();
  make->add_option("--activation", *act, "relu, gelu, tanh or none")->capture_default_str();
  make->add_flag("--json", json, "Print one JSON document");
  make->callback([&json, &exit_code, out, layers, seed, act] {
    auto widths = parse_widths(*layers);
    auto activation = parse_activation(*act);
    expected<void> written = !widths ? expected<void>(widths.error())
                             : !activation
                                 ? expected<void>(make_error(errc::invalid_argument,
                                                             "unknown activation '" + *act + "'"))
                                 : expected<void>{};
    std::string target = *out + "/" + model_file_name;
    if (written) written = write_dense_model(target, {*widths, *activation, *seed});
    if (!written) {
      std::cerr << "warmctl: " << written.error().message << "\n";
      exit_code = exit_usage;
      return;
    }
    auto bytes = dense_data_bytes(*widths);
    if (json)
      std::cout << nlohmann::json{{"path", target},
                                  {"layers", *widths},
                                  {"activation", *act},
                                  {"seed", *seed},
                                  {"bytes", bytes}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      std::printf("wrote %s: dense %s, %s, %s\n", target.c_str(), layers->c_str(), act->c_str(),
                  format_bytes(bytes).c_str());
    exit_code = exit_ok;
  });
}

}  // namespace warm::ctl
