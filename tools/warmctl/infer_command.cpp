// infer: builds one F32 input tensor from a JSON file or random values and runs it.
#include <cstring>
#include <fstream>
#include <iostream>
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

// The input width of model or vmodel `id` as the server reports it (a vmodel: its active
// model's). Returns 0 and sets `rc` when it cannot be known: the server's status, an unknown
// id, or a model whose header could not be read (each with a message on stderr).
std::uint64_t input_width_of(command_context& ctx, connection& c, const std::string& id, int& rc) {
  auto model_status_of = [&](const std::string& model) {
    auto req = c.warm().getModelStatusRequest();
    req.setId(model);
    return ctx.s.wait(req.send());
  };
  auto reply = model_status_of(id);
  if ((rc = check_status(reply.getStatus()))) return 0;
  auto status = r::from_capnp(reply.getModel());
  if (status.state == model_state::not_found) {
    auto vreq = c.warm().getVModelStatusRequest();
    vreq.setId(id);
    auto vreply = ctx.s.wait(vreq.send());
    if (vreply.getStatus().getCode() == r::Status::Code::NOT_FOUND) {
      std::cerr << "warmctl: not_found: no model or vmodel '" << id << "' is registered\n";
      rc = exit_server_error;
      return 0;
    }
    if ((rc = check_status(vreply.getStatus()))) return 0;
    auto active = r::to_std(vreply.getVmodel().getActive());
    auto areply = model_status_of(active);
    if ((rc = check_status(areply.getStatus()))) return 0;
    status = r::from_capnp(areply.getModel());
  }
  if (status.input_width == 0) {
    std::cerr << "warmctl: the input width of model '" << status.id
              << "' is unknown (its file header could not be read); pass --width W\n";
    rc = exit_server_error;
  }
  return status.input_width;
}

tensor to_tensor(const input_values& v) {
  tensor t;
  t.name = "input";
  t.type = dtype::f32;
  t.shape = v.shape;
  t.data.resize(v.data.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data.data(),
              t.data.size());  // little-endian hosts only (x86, arm64)
  return t;
}

}  // namespace

void add_infer_command(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand("infer", "Run model (or vmodel) ID on one F32 input");
  struct args_t {
    std::string id, input;
    bool random = false;
    std::uint64_t width = 0, batch = 0, seed = 1;
  };
  auto a = std::make_shared<args_t>();
  cmd->add_option("ID", a->id, "Model or vmodel id")->required();
  auto* input = cmd->add_option(
      "--input", a->input,
      "JSON file: {\"shape\": [...], \"data\": [...]} or a nested array of numbers");
  auto* random = cmd->add_flag("--random", a->random, "Uniform random values in [-1, 1]");
  input->excludes(random);
  cmd->add_option("--width", a->width,
                  "--random: the input width (default: the model's, as the server reports it)");
  cmd->add_option("--batch", a->batch,
                  "Rows: --random default 1; repeats a one-row --input N times");
  cmd->add_option("--seed", a->seed, "--random: seed of the values")->capture_default_str();
  cmd->callback([&ctx, a] {
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
      if (a->random) {
        int rc = exit_ok;
        std::uint64_t width = a->width ? a->width : input_width_of(ctx, c, a->id, rc);
        if (rc != exit_ok) return rc;
        values = random_values(a->batch ? a->batch : 1, width, a->seed);
      }
      auto req = c.warm().inferRequest();
      r::to_capnp(infer_request{a->id, {to_tensor(values)}}, req.initRequest());
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
