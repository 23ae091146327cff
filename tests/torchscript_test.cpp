// TorchScript models built by PyTorch at test time (tools/torch_models.py: a CNN, a
// transformer encoder layer, and a model with INT64 ids and an FP32 mask in and a tuple of two
// outputs), served by warm through the embedding API, Cap'n Proto and KServe V2 HTTP: every output
// matches PyTorch's own for the same inputs within 1e-5 relative error. Also: the inputs and
// outputs every front reports, typed inputs checked before a model sees them, dynamic batching of a
// TorchScript model, and placement only on devices that can run it. Skipped (77) without
// /usr/bin/python3's torch.
#define CATCH_CONFIG_RUNNER
#include <capnp/ez-rpc.h>
#include <httplib.h>
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>

#include "gpu/upload_pipeline.hpp"
#include "http/http_front.hpp"
#include "rpc/convert.hpp"
#include "support/runtime_fixture.hpp"
#include "support/warmd_process.hpp"
#include "warm/backend.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"
#include "warm/safetensors.hpp"

using namespace warm;
using warm::test::warmd_process;
namespace fs = std::filesystem;
namespace r = warm::rpc;
using json = nlohmann::json;
using Code = warm::rpc::Status::Code;

namespace {

fs::path models_dir;  // repo/ and cases/, made once by main()

// The embedding API's tests run TorchScript in this process: a test's own models, so its code is
// trusted here (warmd leaves it to a runtime unless --in-process-code).
const bool in_process_code = [] {
  code_policy policy;
  policy.in_process = true;
  set_code_policy(policy);
  return true;
}();

struct torch_case {
  std::vector<tensor> inputs;
  std::map<std::string, tensor> outputs;  // PyTorch's
};

// The inputs and PyTorch's outputs for `model` (cases/<model>.safetensors).
torch_case load_case(const std::string& model) {
  std::ifstream in(models_dir / "cases" / (model + ".safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto header = parse_safetensors(bytes);
  REQUIRE(header);
  torch_case c;
  for (const auto& info : header->tensors) {
    tensor t;
    t.type = info.dtype;
    t.shape = info.shape;
    auto begin = bytes.data() + header->data_offset + info.begin;
    t.data.assign(reinterpret_cast<const std::byte*>(begin),
                  reinterpret_cast<const std::byte*>(begin) + info.bytes());
    auto dot = info.name.find('.');
    t.name = info.name.substr(dot + 1);
    if (info.name.compare(0, dot, "input") == 0)
      c.inputs.push_back(std::move(t));
    else
      c.outputs.emplace(t.name, std::move(t));
  }
  return c;
}

std::vector<float> floats(const tensor& t) {
  REQUIRE(t.type == dtype::f32);
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Every expected output is there with its shape, each element within 1e-5 relative error (1e-6
// absolute near zero).
void check_outputs(const std::vector<tensor>& got, const torch_case& expected) {
  REQUIRE(got.size() == expected.outputs.size());
  for (const auto& t : got) {
    INFO("output " << t.name);
    auto it = expected.outputs.find(t.name);
    REQUIRE(it != expected.outputs.end());
    CHECK(t.shape == it->second.shape);
    auto a = floats(t), b = floats(it->second);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO("element " << i << ": warm " << a[i] << ", torch " << b[i]);
      CHECK(std::fabs(a[i] - b[i]) <= 1e-5 * std::fabs(b[i]) + 1e-6);
    }
  }
}

runtime_options options_for(const fs::path& state) {
  runtime_options o;
  o.repositories = {(models_dir / "repo").string()};
  o.state_dir = state.string();
  o.devices = {"host:256MiB"};
  return o;
}

struct temp_dir {
  temp_dir() {
    char tmpl[] = "/tmp/warm-torch-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

// A device that is not the host's (as a GPU is not): TorchScript models may not be placed on it.
class elsewhere_device final : public device {
 public:
  elsewhere_device(std::string name, std::uint64_t capacity) : device(std::move(name), capacity) {}

 protected:
  expected<std::unique_ptr<device_buffer>> allocate_memory(std::uint64_t) override {
    return make_error(errc::capacity_exhausted, "this test device holds nothing");
  }
  std::unique_ptr<upload_target> upload_target_for(device_buffer&) override { return nullptr; }
  expected<void> run(const dense_resident&, const float*, std::uint64_t, float*) override {
    return make_error(errc::internal, "unreachable");
  }
};

}  // namespace

TEST_CASE("TorchScript models answer as PyTorch does, through the embedding API") {
  temp_dir state;
  auto rt = runtime::create(options_for(state.path));
  REQUIRE(rt);
  auto& w = **rt;
  for (const char* id : {"cnn", "cnn_plain", "encoder", "pooler"})
    REQUIRE(w.register_model(id, model_info(id)).get());

  for (const char* id : {"cnn", "encoder", "pooler"}) {
    INFO("model " << id);
    auto c = load_case(id);
    auto result = w.infer({id, c.inputs}).get();
    REQUIRE(result);
    check_outputs(result->outputs, c);
  }
  SECTION("inputs by name in any order, one row without its batch dimension") {
    auto c = load_case("pooler");
    std::swap(c.inputs[0], c.inputs[1]);
    auto result = w.infer({"pooler", c.inputs}).get();
    REQUIRE(result);
    check_outputs(result->outputs, c);
    for (auto& t : c.inputs) {  // the first row alone, as [6]
      t.shape.erase(t.shape.begin());
      t.data.resize(t.data.size() / 4);
    }
    auto one = w.infer({"pooler", c.inputs}).get();
    REQUIRE(one);
    CHECK(one->outputs[0].shape == std::vector<std::uint64_t>{1, 3});
  }
  SECTION("a model without a declaration takes its tensors as given") {
    auto c = load_case("cnn");
    c.inputs[0].name.clear();
    auto result = w.infer({"cnn_plain", c.inputs}).get();
    REQUIRE(result);
    check_outputs(result->outputs, c);  // the same weights as "cnn"
    c.inputs[0].shape = {3, 8, 8, 3};   // the same bytes, a shape the model cannot take
    auto refused = w.infer({"cnn_plain", c.inputs}).get();
    REQUIRE(!refused);
    CHECK(refused.error().code == errc::invalid_argument);
    CHECK_THAT(refused.error().message, Catch::Contains("the model refused the inputs"));
    // The line that says what failed, not the interpreter's opening line.
    CHECK_THAT(refused.error().message, Catch::Contains("channels"));
    CHECK_THAT(refused.error().message, !Catch::Contains("TorchScript interpreter"));
  }
  SECTION("typed inputs are checked before the model sees them") {
    auto c = load_case("pooler");
    auto wrong = c.inputs;
    wrong[0].type = dtype::f64;  // ids: same bytes, wrong type
    auto r1 = w.infer({"pooler", wrong}).get();
    REQUIRE(!r1);
    CHECK_THAT(r1.error().message,
               Catch::Contains("input 'ids' must be I64 (INT64), not F64 (FP64)"));
    auto missing = c.inputs;
    missing.pop_back();
    auto r2 = w.infer({"pooler", missing}).get();
    REQUIRE(!r2);
    CHECK_THAT(r2.error().message, Catch::Contains("takes 2 input tensors ('ids', 'mask')"));
    auto renamed = c.inputs;
    renamed[1].name = "attention";
    auto r3 = w.infer({"pooler", renamed}).get();
    REQUIRE(!r3);
    CHECK_THAT(r3.error().message, Catch::Contains("unknown input tensor 'attention'"));
    auto uneven = c.inputs;
    uneven[1].shape[0] = 2;
    uneven[1].data.resize(uneven[1].data.size() / 2);
    auto r4 = w.infer({"pooler", uneven}).get();
    REQUIRE(!r4);
    CHECK_THAT(r4.error().message, Catch::Contains("inputs disagree on the batch"));
  }
  SECTION("status reports the kind and the declared tensors") {
    auto st = w.status("pooler").get();
    REQUIRE(st);
    CHECK(st->kind == "torchscript");
    REQUIRE(st->io.inputs.size() == 2);
    CHECK(describe(st->io.inputs[0]) == "ids I64 [-1, 6]");
    CHECK(describe(st->io.inputs[1]) == "mask F32 [-1, 6]");
    REQUIRE(st->io.outputs.size() == 2);
    CHECK(describe(st->io.outputs[1]) == "output_1 F32 [-1, 8]");
    CHECK(st->io.batched);
    auto plain = w.status("cnn_plain").get();
    REQUIRE(plain);
    REQUIRE(plain->io.inputs.size() == 1);
    CHECK(describe(plain->io.inputs[0]) == "image (any)");
    CHECK(!plain->io.batched);
  }
}

TEST_CASE("a TorchScript model's requests are batched: each gets its own rows") {
  temp_dir state;
  auto o = options_for(state.path);
  o.batching.max_batch = 3;
  o.batching.max_queue_delay = std::chrono::milliseconds(200);
  o.inference_threads = 1;
  auto rt = runtime::create(o);
  REQUIRE(rt);
  auto& w = **rt;
  REQUIRE(w.register_model("cnn", model_info("cnn")).get());
  auto c = load_case("cnn");  // the three requests wait on the cold load together
  const auto& image = c.inputs[0];
  const auto row = image.data.size() / 3;
  std::vector<std::future<expected<infer_result>>> answers;
  for (std::size_t i = 0; i < 3; ++i) {
    tensor one{"image", dtype::f32, {1, 3, 8, 8}, {}};
    one.data.assign(image.data.begin() + static_cast<std::ptrdiff_t>(i * row),
                    image.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
    answers.push_back(w.infer({"cnn", {one}}));
  }
  auto expected = floats(c.outputs.at("output"));
  for (std::size_t i = 0; i < 3; ++i) {
    auto result = answers[i].get();
    REQUIRE(result);
    auto got = floats(result->outputs.at(0));
    REQUIRE(got.size() == 10);
    for (std::size_t k = 0; k < 10; ++k)
      CHECK(std::fabs(got[k] - expected[i * 10 + k]) <=
            1e-5 * std::fabs(expected[i * 10 + k]) + 1e-6);
  }
  auto passes = w.metrics().batch_rows.read();
  CHECK(passes.sum == 3);
  CHECK(passes.count < 3);  // some rows shared a pass
}

TEST_CASE("TorchScript models are placed only on devices that can run them") {
  temp_dir state;
  auto o = options_for(state.path);
  o.make_device = [](const device_spec& spec) -> expected<std::unique_ptr<device>> {
    if (spec.partition == 1)
      return std::unique_ptr<device>(std::make_unique<elsewhere_device>("host.1", 1 << 30));
    return make_device(spec);
  };
  SECTION("none can: the error says so") {
    o.devices = {"host.1:1GiB"};
    auto rt = runtime::create(o);
    REQUIRE(rt);
    REQUIRE((*rt)->register_model("cnn", model_info("cnn")).get());
    auto loaded = (*rt)->ensure_loaded("cnn", true).get();
    REQUIRE(!loaded);
    CHECK_THAT(loaded.error().message,
               Catch::Contains("no device can run torchscript models (devices: host.1)"));
  }
  SECTION("the host is chosen though the other device has more room") {
    o.devices = {"host.1:1GiB", "host:64MiB"};
    auto rt = runtime::create(o);
    REQUIRE(rt);
    REQUIRE((*rt)->register_model("cnn", model_info("cnn")).get());
    REQUIRE((*rt)->ensure_loaded("cnn", true).get());
    auto st = (*rt)->status("cnn").get();
    REQUIRE(st);
    CHECK(st->device == "host");
  }
}

// The resident entry for `model` on the first device; fails the test when it is not resident.
resident_info resident_entry(runtime& w, const std::string& model) {
  auto snapshot = w.inspect().get();
  REQUIRE(snapshot);
  for (const auto& r : snapshot->devices.at(0).resident)
    if (r.model == model) return r;
  FAIL(model << " is not resident");
  return {};
}

TEST_CASE("a TorchScript model is charged what its load measured, not what its file says") {
  temp_dir state;
  auto o = options_for(state.path);
  auto file_size = [](const char* model) {
    return fs::file_size(models_dir / "repo" / model / "1" / "model.pt");
  };

  SECTION("the measurement replaces the prediction, up or down") {
    auto rt = runtime::create(o);
    REQUIRE(rt);
    auto& w = **rt;
    for (const char* id : {"balloon", "cnn"}) {
      INFO("model " << id);
      REQUIRE(w.register_model(id, model_info(id)).get());
      REQUIRE(w.ensure_loaded(id, true).get());
      auto r = resident_entry(w, id);
      CHECK(r.predicted == file_size(id));
      CHECK(r.measured > 0);
      CHECK(r.bytes == r.measured);
      auto st = w.status(id).get();
      REQUIRE(st);
      CHECK(st->bytes == r.measured);  // later loads reserve it
    }
    // A few KiB on disk; its warm-up's 16 MiB of scratch is what it takes.
    CHECK(file_size("balloon") < 64 * 1024);
    CHECK(resident_entry(w, "balloon").measured >= (std::uint64_t{16} << 20));
    auto snapshot = w.inspect().get();
    REQUIRE(snapshot);
    CHECK(snapshot->devices[0].used ==
          resident_entry(w, "balloon").bytes + resident_entry(w, "cnn").bytes);
  }

  SECTION("a device that is full evicts for the rest") {
    o.devices = {"host:24MiB"};
    for (const char* id : {"dense_a", "dense_b"}) {
      dense_model_options d;
      d.widths = widths_for_bytes(std::uint64_t{7} << 20);
      REQUIRE(
          write_dense_model((state.path / "repo" / id / "1" / "model.safetensors").string(), d));
    }
    o.repositories.push_back((state.path / "repo").string());
    auto rt = runtime::create(o);
    REQUIRE(rt);
    auto& w = **rt;
    for (const char* id : {"dense_a", "dense_b", "balloon"})
      REQUIRE(w.register_model(id, model_info(id)).get());
    REQUIRE(w.ensure_loaded("dense_a", true).get());
    REQUIRE(w.ensure_loaded("dense_b", true).get());
    // 14 MiB resident, 10 free: the balloon's prediction fits, its 16 MiB do not.
    auto loaded = w.ensure_loaded("balloon", true).get();
    REQUIRE((loaded ? std::string("loaded") : loaded.error().message) == "loaded");
    auto snapshot = w.inspect().get();
    REQUIRE(snapshot);
    const auto& dev = snapshot->devices[0];
    CHECK(dev.evictions >= 1);
    CHECK(dev.used <= dev.capacity);
    std::uint64_t charged = 0;
    for (const auto& r : dev.resident)
      charged += r.bytes;
    CHECK(charged + dev.draining == dev.used);
    CHECK(resident_entry(w, "balloon").bytes >= (std::uint64_t{16} << 20));
  }

  SECTION("a model that takes more than the device holds fails as too large, and stays refused") {
    o.devices = {"host:12MiB"};
    auto rt = runtime::create(o);
    REQUIRE(rt);
    auto& w = **rt;
    REQUIRE(w.register_model("balloon", model_info("balloon")).get());
    auto loaded = w.ensure_loaded("balloon", true).get();
    REQUIRE(!loaded);
    CHECK(loaded.error().code == errc::model_too_large);
    CHECK_THAT(loaded.error().message, Catch::Contains("once loaded, more than the"));
    // Nothing kept, nothing leaked: the dropped model's bytes come back once the reclaimer has
    // freed it, off the actors' threads (possibly just after the failure is answered).
    CHECK(test::eventually([&] {
      auto snapshot = w.inspect().get();
      return snapshot && snapshot->devices[0].used == 0;
    }));
    auto st = w.status("balloon").get();
    REQUIRE(st);
    CHECK(st->bytes >= (std::uint64_t{16} << 20));
    auto again = w.ensure_loaded("balloon", true).get();
    REQUIRE(!again);
    CHECK(again.error().code == errc::model_too_large);
  }
}

TEST_CASE("warmd serves TorchScript models over Cap'n Proto and KServe V2 HTTP") {
  warmd_process d;
  fs::copy(models_dir / "repo", d.repo(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  d.device = "host:256MiB";
  d.log_level = "info";
  d.start({"--http", "127.0.0.1:0", "--in-process-code"});
  auto port = d.announced_port("serving HTTP on 127.0.0.1:");
  capnp::EzRpcClient ez(d.address());
  auto warm = ez.getMain<r::Warm>();
  auto& ws = ez.getWaitScope();
  for (const char* id : {"cnn", "encoder", "pooler"}) {
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath(id);
    REQUIRE(req.send().wait(ws).getStatus().getCode() == Code::OK);
  }
  httplib::Client http("127.0.0.1", port);

  for (const char* id : {"cnn", "encoder", "pooler"}) {
    INFO("model " << id);
    auto c = load_case(id);
    // Cap'n Proto
    auto req = warm.inferRequest();
    r::to_capnp(infer_request{id, c.inputs}, req.initRequest());
    auto res = req.send().wait(ws);
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto out = r::from_capnp(res.getResult());
    REQUIRE(out);
    check_outputs(out->outputs, c);
    // HTTP, JSON data in each input's datatype
    json inputs = json::array();
    for (const auto& t : c.inputs) {
      json data = json::array();
      if (t.type == dtype::i64) {
        for (std::size_t i = 0; i < t.data.size() / 8; ++i) {
          std::int64_t v;
          std::memcpy(&v, t.data.data() + i * 8, 8);
          data.push_back(v);
        }
      } else {
        for (float v : floats(t))
          data.push_back(v);
      }
      inputs.push_back({{"name", t.name},
                        {"datatype", std::string(v2_name(t.type))},
                        {"shape", t.shape},
                        {"data", data}});
    }
    auto answer = http.Post((std::string("/v2/models/") + id + "/infer").c_str(),
                            json{{"inputs", inputs}}.dump(), "application/json");
    REQUIRE(answer);
    INFO(answer->body);
    REQUIRE(answer->status == 200);
    auto body = json::parse(answer->body);
    std::vector<tensor> got;
    for (const auto& o : body["outputs"]) {
      CHECK(o["datatype"] == "FP32");
      tensor t{o["name"], dtype::f32, o["shape"].get<std::vector<std::uint64_t>>(), {}};
      auto values = o["data"].get<std::vector<float>>();
      t.data.resize(values.size() * 4);
      std::memcpy(t.data.data(), values.data(), t.data.size());
      got.push_back(std::move(t));
    }
    check_outputs(got, c);
  }
  SECTION("model metadata is the model's own") {
    auto meta = http.Get("/v2/models/pooler");
    REQUIRE(meta);
    REQUIRE(meta->status == 200);
    auto body = json::parse(meta->body);
    CHECK(body["platform"] == "pytorch_libtorch");
    CHECK(body["inputs"] == json::parse(R"([{"name":"ids","datatype":"INT64","shape":[-1,6]},
                                             {"name":"mask","datatype":"FP32","shape":[-1,6]}])"));
    CHECK(body["outputs"][1] ==
          json::parse(R"({"name":"output_1","datatype":"FP32","shape":[-1,8]})"));
    auto req = warm.getModelStatusRequest();
    req.setId("pooler");
    auto st = r::from_capnp(req.send().wait(ws).getModel());
    CHECK(st.kind == "torchscript");
    REQUIRE(st.io.inputs.size() == 2);
    CHECK(describe(st.io.inputs[0]) == "ids I64 [-1, 6]");
  }
  SECTION(
      "warmctl shows the tensors and makes random inputs of the model's own dtypes and shapes") {
    auto run = [&](const std::string& args) {
      std::string command =
          std::string(std::getenv("WARMCTL")) + " --connect " + d.address() + " " + args + " 2>&1";
      std::string out;
      FILE* p = ::popen(command.c_str(), "r");
      REQUIRE(p);
      char buffer[4096];
      while (auto n = std::fread(buffer, 1, sizeof buffer, p))
        out.append(buffer, n);
      CHECK(::pclose(p) == 0);
      return out;
    };
    auto status = run("status pooler");
    CHECK_THAT(status,
               Catch::Contains("inputs:") && Catch::Contains("ids I64 [-1, 6]; mask F32 [-1, 6]"));
    CHECK_THAT(status, Catch::Contains("kind:") && Catch::Contains("torchscript"));
    auto answer = json::parse(run("--json infer pooler --random --batch 2"));
    REQUIRE(answer["outputs"].size() == 2);
    CHECK(answer["outputs"][0]["name"] == "output_0");
    CHECK(answer["outputs"][0]["shape"] == json::array({2, 3}));
    CHECK(answer["outputs"][1]["shape"] == json::array({2, 8}));
  }
  SECTION("an output asked for by name, and a value INT64 cannot hold") {
    auto c = load_case("pooler");
    json ids = json::array(), mask = json::array();
    for (int i = 0; i < 6; ++i)
      ids.push_back(i), mask.push_back(1.0);
    json request = {{"inputs",
                     {{{"name", "ids"}, {"datatype", "INT64"}, {"shape", {1, 6}}, {"data", ids}},
                      {{"name", "mask"}, {"datatype", "FP32"}, {"shape", {1, 6}}, {"data", mask}}}},
                    {"outputs", {{{"name", "output_1"}}}}};
    auto answer = http.Post("/v2/models/pooler/infer", request.dump(), "application/json");
    REQUIRE(answer);
    REQUIRE(answer->status == 200);
    auto body = json::parse(answer->body);
    REQUIRE(body["outputs"].size() == 1);
    CHECK(body["outputs"][0]["name"] == "output_1");
    request["inputs"][0]["data"][2] = 1.5;
    answer = http.Post("/v2/models/pooler/infer", request.dump(), "application/json");
    REQUIRE(answer);
    CHECK(answer->status == 400);
    CHECK_THAT(answer->body, Catch::Contains("element 2 is not an integer"));
  }
}

TEST_CASE("warmd runs TorchScript models isolated in a model runtime, with PyTorch's answers") {
  const char* runtime = std::getenv("WARM_RUNTIME");
  REQUIRE(runtime != nullptr);
  warmd_process d;
  fs::copy(models_dir / "repo", d.repo(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  d.device = "host:1KiB";  // no room for a model in warmd's own process
  d.start({"--runtime", std::string("torch=") + runtime + " --capacity 256MiB"});
  capnp::EzRpcClient ez(d.address());
  auto warm = ez.getMain<r::Warm>();
  auto& ws = ez.getWaitScope();
  for (const char* id : {"cnn", "encoder", "pooler"}) {
    INFO("model " << id);
    auto reg = warm.registerModelRequest();
    reg.setId(id);
    reg.getInfo().setPath(id);
    REQUIRE(reg.send().wait(ws).getStatus().getCode() == Code::OK);
    auto c = load_case(id);
    auto req = warm.inferRequest();
    r::to_capnp(infer_request{id, c.inputs}, req.initRequest());
    auto res = req.send().wait(ws);
    INFO(res.getStatus().getMessage().cStr());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto out = r::from_capnp(res.getResult());
    REQUIRE(out);
    check_outputs(out->outputs, c);
    auto status = warm.getModelStatusRequest();
    status.setId(id);
    auto model = r::from_capnp(status.send().wait(ws).getModel());
    CHECK(model.device == "torch");
    CHECK(model.bytes > 0);
  }
}

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/warm-torch-models-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  models_dir = tmpl;
  auto script = fs::path(WARM_SOURCE_ROOT) / "tools" / "torch_models.py";
  auto command = "/usr/bin/python3 " + script.string() + " " + (models_dir / "repo").string() +
                 " " + (models_dir / "cases").string();
  int status = std::system(command.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  int result = code;
  if (code == 0) {
    auto kinds = backend_kinds();
    if (std::find(kinds.begin(), kinds.end(), "torchscript") == kinds.end()) {
      std::fprintf(stderr, "torchscript_test: this build has no TorchScript backend\n");
      result = 77;
    } else {
      result = Catch::Session().run(argc, argv);
    }
  }
  std::error_code ec;
  fs::remove_all(models_dir, ec);
  return result;
}
