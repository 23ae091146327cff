// infer: builds one F32 input tensor from a JSON file or random values and runs it.
#include <cstring>
#include <fstream>
#include <iostream>
#include <utility>
#include <memory>
#include <random>

#include "commands.hpp"
#include "format.hpp"
#include "rpc/convert.hpp"

namespace warm::ctl {
namespace {

namespace r = warm::rpc;

struct input_values {
  std::vector<std::uint64_t> shape;
  std::vector<float> data;
};

// Flattens a nested array of numbers, checking that it is rectangular.
expected<void> flatten(const nlohmann::json& node, std::size_t depth, input_values& out) {
  if (node.is_number()) {
    if (depth != out.shape.size())
      return make_error(errc::invalid_argument, "input is not a rectangular array");
    out.data.push_back(node.get<float>());
    return {};
  }
  if (!node.is_array() || node.empty())
    return make_error(errc::invalid_argument, "input holds an empty array or a non-number");
  if (depth == out.shape.size()) {
    if (!out.data.empty())
      return make_error(errc::invalid_argument, "input is not a rectangular array");
    out.shape.push_back(node.size());
  } else if (depth > out.shape.size() || out.shape[depth] != node.size()) {
    return make_error(errc::invalid_argument, "input is not a rectangular array");
  }
  for (const auto& child : node)
    if (auto ok = flatten(child, depth + 1, out); !ok) return ok;
  return {};
}

// {"shape": [...], "data": [...]} or a nested array ([w] or [[...], ...]).
expected<input_values> read_input(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read '" + path + "'");
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded())
    return make_error(errc::invalid_argument, "'" + path + "' is not valid JSON");
  input_values values;
  if (doc.is_object()) {
    if (!doc.contains("shape") || !doc.contains("data") || !doc["shape"].is_array() ||
        !doc["data"].is_array())
      return make_error(errc::invalid_argument,
                        "'" + path + "': an object needs \"shape\" and \"data\" arrays");
    std::uint64_t elements = 1;
    for (const auto& d : doc["shape"]) {
      if (!d.is_number_unsigned())
        return make_error(errc::invalid_argument, "'" + path + "': shape holds a non-integer");
      values.shape.push_back(d.get<std::uint64_t>());
      elements *= values.shape.back();
    }
    for (const auto& v : doc["data"]) {
      if (!v.is_number())
        return make_error(errc::invalid_argument, "'" + path + "': data holds a non-number");
      values.data.push_back(v.get<float>());
    }
    if (elements != values.data.size())
      return make_error(errc::invalid_argument,
                        "'" + path + "': shape holds " + std::to_string(elements) +
                            " values but data has " + std::to_string(values.data.size()));
    return values;
  }
  if (auto ok = flatten(doc, 0, values); !ok)
    return make_error(errc::invalid_argument, "'" + path + "': " + ok.error().message);
  return values;
}

// --batch N on a one-dimensional input repeats it as N rows; on a batch it must match.
expected<void> apply_batch(input_values& v, std::uint64_t batch) {
  if (batch == 0) return {};
  if (v.shape.size() == 1) {
    std::vector<float> rows;
    for (std::uint64_t i = 0; i < batch; ++i)
      rows.insert(rows.end(), v.data.begin(), v.data.end());
    v.data = std::move(rows);
    v.shape.insert(v.shape.begin(), batch);
    return {};
  }
  if (v.shape.empty() || v.shape[0] != batch)
    return make_error(errc::invalid_argument, "--batch " + std::to_string(batch) +
                                                  " does not match the input's first dimension");
  return {};
}

// Uniform random values in [-1, 1]: `rows` rows of `width`.
input_values random_values(std::uint64_t rows, std::uint64_t width, std::uint64_t seed) {
  input_values values;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  values.shape = {rows, width};
  values.data.resize(rows * width);
  for (auto& v : values.data)
    v = dist(rng);
  return values;
}

// The status of model or vmodel `id` as the server reports it (a vmodel: its active model's).
// Sets `rc` when it cannot be had (with a message on stderr).
model_status status_of(command_context& ctx, connection& c, const std::string& id, int& rc) {
  auto model_status_of = [&](const std::string& model) {
    auto req = c.warm().getModelStatusRequest();
    req.setId(model);
    return ctx.s.wait(req.send());
  };
  auto reply = model_status_of(id);
  if ((rc = check_status(reply.getStatus()))) return {};
  auto status = r::from_capnp(reply.getModel());
  if (status.state == model_state::not_found) {
    auto vreq = c.warm().getVModelStatusRequest();
    vreq.setId(id);
    auto vreply = ctx.s.wait(vreq.send());
    if (vreply.getStatus().getCode() == r::Status::Code::NOT_FOUND) {
      std::cerr << "warmctl: not_found: no model or vmodel '" << id << "' is registered\n";
      rc = exit_server_error;
      return {};
    }
    if ((rc = check_status(vreply.getStatus()))) return {};
    auto active = r::to_std(vreply.getVmodel().getActive());
    auto areply = model_status_of(active);
    if ((rc = check_status(areply.getStatus()))) return {};
    status = r::from_capnp(areply.getModel());
  }
  return status;
}

// Random inputs for a model from its reported inputs: `rows` rows for a batched model, every other
// dynamic dimension 1. Floats uniform in [-1, 1], integers in [0, 9], booleans either. An input
// the model does not declare cannot be made up: empty, with the reason on stderr.
std::vector<tensor> random_inputs(const model_status& status, std::uint64_t rows, std::uint64_t seed) {
  if (status.io.inputs.empty()) {
    std::cerr << "warmctl: the inputs of model '" << status.id << "' are unknown (its file could not be read)\n";
    return {};
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  std::vector<tensor> inputs;
  for (const auto& spec : status.io.inputs) {
    if (!spec.known) {
      std::cerr << "warmctl: model '" << status.id << "' does not declare the dtype and shape of its input '"
                << spec.name << "' (docs/model-format.md); pass --input FILE.json\n";
      return {};
    }
    tensor t{spec.name, spec.type, {}, {}};
    std::uint64_t elements = 1;
    for (std::size_t d = 0; d < spec.shape.size(); ++d) {
      auto dim = spec.shape[d] >= 0 ? static_cast<std::uint64_t>(spec.shape[d]) : (d == 0 && status.io.batched ? rows : 1);
      t.shape.push_back(dim);
      elements *= dim;
    }
    const auto size = dtype_size(spec.type);
    t.data.resize(elements * size);
    for (std::uint64_t i = 0; i < elements; ++i) {
      auto* at = t.data.data() + i * size;
      auto put = [&](auto v) { std::memcpy(at, &v, sizeof v); };
      switch (spec.type) {
        case dtype::f32: put(real(rng)); break;
        case dtype::f64: put(static_cast<double>(real(rng))); break;
        case dtype::f16: put(float_to_half(real(rng))); break;
        case dtype::bf16: put(float_to_bfloat16(real(rng))); break;
        case dtype::boolean: put(static_cast<std::uint8_t>(small(rng) % 2)); break;
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

tensor to_tensor(const input_values& v) {
  tensor t;  // unnamed: the model's single input, whatever its name
  t.type = dtype::f32;
  t.shape = v.shape;
  t.data.resize(v.data.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data.data(),
              t.data.size());  // little-endian hosts only (x86, arm64)
  return t;
}

}  // namespace

void add_infer_command(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand("infer", "Run model (or vmodel) ID on an F32 input from a file, or on random inputs");
  struct args_t {
    std::string id, input, version;
    bool random = false;
    std::uint64_t width = 0, batch = 0, seed = 1;
  };
  auto a = std::make_shared<args_t>();
  cmd->add_option("ID", a->id, "Model or vmodel id (a served model's version: NAME@VERSION or NAME@LABEL)")->required();
  cmd->add_option("--version", a->version, "A served model's version or label: the same as ID@VERSION");
  auto* input = cmd->add_option(
      "--input", a->input,
      "JSON file: {\"shape\": [...], \"data\": [...]} or a nested array of numbers");
  auto* random = cmd->add_flag("--random", a->random,
                               "Random inputs of the model's own dtypes and shapes (floats in [-1, 1], integers 0-9)");
  input->excludes(random);
  cmd->add_option("--width", a->width,
                  "--random: one F32 input of this width, named 'input' (default: the model's own inputs)");
  cmd->add_option("--batch", a->batch,
                  "Rows: --random default 1; repeats a one-row --input N times");
  cmd->add_option("--seed", a->seed, "--random: seed of the values")->capture_default_str();
  cmd->callback([&ctx, a] {
    if (!a->version.empty()) a->id += "@" + std::exchange(a->version, {});
    input_values values;
    if (!a->random && !a->input.empty()) {
      auto read = read_input(a->input);
      auto ok = read ? apply_batch(*read, a->batch) : expected<void>(read.error());
      if (!ok) {
        ctx.exit_code = usage_error(ok.error().message);
        return;
      }
      values = std::move(*read);
    } else if (!a->random) {
      ctx.exit_code = usage_error("infer needs --input FILE.json or --random");
      return;
    }
    run_rpc(ctx, [&](connection& c) {
      std::vector<tensor> inputs;
      if (a->random && !a->width) {
        int rc = exit_ok;
        auto status = status_of(ctx, c, a->id, rc);
        if (rc != exit_ok) return rc;
        inputs = random_inputs(status, a->batch ? a->batch : 1, a->seed);
        if (inputs.empty()) return exit_server_error;
      } else {
        if (a->random) values = random_values(a->batch ? a->batch : 1, a->width, a->seed);
        inputs.push_back(to_tensor(values));
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
