// infer: builds the input tensors from JSON files (input_file.hpp) or random values and runs them.
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <utility>

#include "commands.hpp"
#include "format.hpp"
#include "input_file.hpp"
#include "rpc/convert.hpp"
#include "tensor_values.hpp"

namespace warm::ctl {
namespace {

namespace r = warm::rpc;

// One unnamed F32 [rows, width] tensor (the model's single input) of values uniform in [-1, 1].
tensor random_f32(std::uint64_t rows, std::uint64_t width, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(rows * width);
  for (auto& v : values)
    v = dist(rng);
  tensor t{{}, dtype::f32, {rows, width}, std::vector<std::byte>(values.size() * sizeof(float))};
  std::memcpy(t.data.data(), values.data(),
              t.data.size());  // little-endian hosts only (x86, arm64)
  return t;
}

// Random inputs for a model from its reported inputs: `rows` rows for a batched model, every other
// dynamic dimension 1. Floats uniform in [-1, 1], integers in [0, 9], booleans either. An input
// the model does not declare cannot be made up: empty, with the reason on stderr.
std::vector<tensor> random_inputs(const model_status& status, std::uint64_t rows,
                                  std::uint64_t seed) {
  if (status.io.inputs.empty()) {
    std::cerr << "warmctl: the inputs of model '" << status.id
              << "' are unknown (its file could not be read)\n";
    return {};
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  std::vector<tensor> inputs;
  for (const auto& spec : status.io.inputs) {
    if (!spec.known) {
      std::cerr << "warmctl: model '" << status.id
                << "' does not declare the dtype and shape of its input '" << spec.name
                << "' (docs/model-format.md); pass --input FILE.json\n";
      return {};
    }
    tensor t{spec.name, spec.type, {}, {}};
    std::uint64_t elements = 1;
    for (std::size_t d = 0; d < spec.shape.size(); ++d) {
      auto dim = spec.shape[d] >= 0 ? static_cast<std::uint64_t>(spec.shape[d])
                                    : (d == 0 && status.io.batched ? rows : 1);
      t.shape.push_back(dim);
      elements *= dim;
    }
    const auto size = dtype_size(spec.type);
    t.data.resize(elements * size);
    for (std::uint64_t i = 0; i < elements; ++i) {
      auto* at = t.data.data() + i * size;
      auto put = [&](auto v) { std::memcpy(at, &v, sizeof v); };
      switch (spec.type) {
        case dtype::f32:
          put(real(rng));
          break;
        case dtype::f64:
          put(static_cast<double>(real(rng)));
          break;
        case dtype::f16:
          put(float_to_half(real(rng)));
          break;
        case dtype::bf16:
          put(float_to_bfloat16(real(rng)));
          break;
        case dtype::f8_e4m3:
          put(float_to_f8_e4m3(real(rng)));
          break;
        case dtype::f8_e5m2:
          put(float_to_f8_e5m2(real(rng)));
          break;
        case dtype::boolean:
          put(static_cast<std::uint8_t>(small(rng) % 2));
          break;
        default: {  // integers, little-endian: the low bytes carry the value
          std::uint64_t v = static_cast<std::uint64_t>(small(rng));
          std::memcpy(at, &v, size);
          break;
        }
      }
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace

void add_infer_command(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand(
      "infer", "Run model (or vmodel) ID on inputs from JSON files, or on random inputs");
  struct args_t {
    std::string id, version;
    std::vector<std::string> inputs;
    bool random = false;
    std::uint64_t width = 0, batch = 0, seed = 1;
  };
  auto a = std::make_shared<args_t>();
  cmd->add_option("ID", a->id,
                  "Model or vmodel id (a served model's version: NAME@VERSION or NAME@LABEL)")
      ->required();
  cmd->add_option("--version", a->version,
                  "A served model's version or label: the same as ID@VERSION");
  auto* input =
      cmd->add_option("--input", a->inputs,
                      "JSON file, repeatable: a nested array of numbers (one F32 tensor), "
                      "{\"name\", \"dtype\", \"shape\", \"data\"} or {\"inputs\": [...]}")
          ->allow_extra_args(false);
  auto* random = cmd->add_flag(
      "--random", a->random,
      "Random inputs of the model's own dtypes and shapes (floats in [-1, 1], integers 0-9)");
  input->excludes(random);
  cmd->add_option(
      "--width", a->width,
      "--random: one unnamed F32 input of this width (default: the model's own inputs)");
  cmd->add_option("--batch", a->batch,
                  "Rows: --random default 1; repeats each one-dimensional --input tensor N times");
  cmd->add_option("--seed", a->seed, "--random: seed of the values")->capture_default_str();
  cmd->callback([&ctx, a] {
    if (!a->version.empty()) a->id += "@" + std::exchange(a->version, {});
    std::vector<tensor> from_files;
    for (const auto& path : a->inputs) {
      auto read = read_input_file(path);
      if (!read) {
        ctx.exit_code = usage_error(read.error().message);
        return;
      }
      for (auto& t : *read) {
        if (auto ok = apply_batch(t, a->batch); !ok) {
          ctx.exit_code = usage_error("'" + path + "': " + ok.error().message);
          return;
        }
        from_files.push_back(std::move(t));
      }
    }
    if (!a->random && a->inputs.empty()) {
      ctx.exit_code = usage_error("infer needs --input FILE.json or --random");
      return;
    }
    run_rpc(ctx, [&](connection& c) {
      std::vector<tensor> inputs;
      if (a->random && !a->width) {
        auto status = resolve_status(ctx, c, a->id);
        if (!status) {
          std::cerr << "warmctl: " << status.error().to_string() << "\n";
          return exit_server_error;
        }
        inputs = random_inputs(status->model, a->batch ? a->batch : 1, a->seed);
        if (inputs.empty()) return exit_server_error;
      } else if (a->random) {
        inputs.push_back(random_f32(a->batch ? a->batch : 1, a->width, a->seed));
      } else {
        inputs = std::move(from_files);
      }
      auto req = c.warm().inferRequest();
      r::to_capnp(infer_request{a->id, std::move(inputs)}, req.initRequest());
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      auto result = r::from_capnp(reply.getResult());
      if (!result) {
        std::cerr << "warmctl: malformed reply: " << result.error().to_string() << "\n";
        return exit_server_error;
      }
      if (ctx.options.json)
        std::cout << dump_json(to_json(*result), 2) << "\n";
      else
        print_infer_result(std::cout, *result);
      return exit_ok;
    });
  });
}

}  // namespace warm::ctl
