// The torchscript backend: PyTorch models exported with torch.jit.script or torch.jit.trace and
// saved as model.pt, run by libtorch on host devices. The only translation unit that includes
// libtorch (it takes ~20 s to compile).
//
// Inputs are forward()'s tensor parameters, by name; outputs are "output" for a single tensor and
// "output_0", "output_1", ... for a tuple or list of tensors. A model may declare its tensors'
// dtypes and shapes in an extra file "warm.json" of its archive (docs/model-format.md); without
// it, inputs are passed to forward() as given and the model is not batched.
#include <torch/script.h>

#include <ATen/Parallel.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <sys/stat.h>
#include <unistd.h>
#include <ext/stdio_filebuf.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <atomic>
#include <cassert>
#include <chrono>
#include <istream>
#include <nlohmann/json.hpp>

#include "backends/builtin.hpp"
#include "backends/code_helper.hpp"
#include "backends/torch_types.hpp"
#include "storage/located_file.hpp"
#include "storage/zip_check.hpp"
#include "warm/units.hpp"

namespace warm {
namespace {

using json = nlohmann::json;

std::atomic<int> intra_op_threads{1};

// A loaded module and what it takes and gives. The module is loaded on the CPU.
struct opened_module {
  torch::jit::Module module;
  model_io io;
};

// The output names a return type gives: "output", or output_0..n-1 for a tuple; none when the
// type is not known before a run (then outputs are named from what forward() returns).
std::vector<std::string> output_names(const c10::TypePtr& returns) {
  if (auto tuple = returns->cast<c10::TupleType>()) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < tuple->elements().size(); ++i)
      names.push_back("output_" + std::to_string(i));
    return names;
  }
  if (returns->kind() == c10::TypeKind::TensorType) return {"output"};
  return {};
}

// Reads "warm.json" (the archive's declaration of its tensors) into `io`: each declared tensor
// must be one forward() has, with a V2 datatype and a shape of dimensions ≥ -1.
expected<void> apply_declaration(const std::string& text, const std::string& path, model_io& io) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, path + ": warm.json: " + why);
  };
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return bad("not a JSON object");
  auto read_side = [&](const char* key, std::vector<tensor_spec>& side) -> expected<void> {
    auto it = doc.find(key);
    if (it == doc.end()) return {};
    if (!it->is_array() || it->size() != side.size())
      return bad(std::string("\"") + key + "\" must list all " + std::to_string(side.size()) +
                 " of forward()'s " + key);
    for (std::size_t i = 0; i < side.size(); ++i) {
      const auto& t = (*it)[i];
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
          t["name"] != side[i].name)
        return bad(std::string(key) + "[" + std::to_string(i) + "] must be named '" + side[i].name +
                   "'");
      auto type = t.contains("datatype") && t["datatype"].is_string()
                      ? parse_v2_dtype(t["datatype"].get<std::string>())
                      : std::nullopt;
      if (!type || !torch_type(*type)) {  // naming what it says (cut short) and what warm takes
        std::string given = t.contains("datatype") && t["datatype"].is_string()
                                ? t["datatype"].get<std::string>()
                                : "";
        if (given.size() > 32) given = given.substr(0, 32) + "...";
        return bad(side[i].name + ": \"datatype\" " +
                   (given.empty() ? std::string("(a string) is required")
                                  : "'" + given + "' is not one warm serves") +
                   "; warm takes FP32, FP16, BF16, FP64, INT64, INT32, INT16, INT8, UINT8 or BOOL");
      }
      if (!t.contains("shape") || !t["shape"].is_array() || t["shape"].size() > 16)
        return bad(side[i].name + ": \"shape\" must be a list of dimensions");
      std::vector<std::int64_t> shape;
      for (const auto& d : t["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < -1)
          return bad(side[i].name + ": dimensions are integers, -1 for a dynamic one");
        shape.push_back(d.get<std::int64_t>());
      }
      side[i] = {side[i].name, *type, std::move(shape), true};
    }
    return {};
  };
  if (auto r = read_side("inputs", io.inputs); !r) return r;
  if (auto r = read_side("outputs", io.outputs); !r) return r;
  if (auto it = doc.find("batched"); it != doc.end()) {
    if (!it->is_boolean()) return bad("\"batched\" must be true or false");
    io.batched = it->get<bool>();
  }
  if (io.batched)
    for (const auto* side : {&io.inputs, &io.outputs})
      for (const auto& t : *side)
        if (!t.known || t.shape.empty() || t.shape.front() != -1)
          return bad("a batched model declares every tensor with a first dimension of -1 ('" +
                     t.name + "' does not)");
  return {};
}

// Loads the archive from the open file `fd` (named `path` in messages), after checking what its
// entries declare: libtorch inflates a compressed entry whole, so a small deflated archive could
// otherwise take gigabytes. Read through a stream on a duplicate of the descriptor, never by a
// path: libtorch reads the very file that was confined, and a sandboxed helper opens nothing.
expected<opened_module> open_module_fd(int fd, const std::string& path) {
  zip_limits limits;
  limits.max_total_bytes = std::uint64_t{64} << 30;
  limits.max_entry_bytes = std::uint64_t{64} << 30;
  if (auto archive = check_zip_fd(fd, limits); !archive)
    return make_error(errc::invalid_argument,
                      path + ": not a TorchScript archive warm loads: " + archive.error().message);
  const int own = ::dup(fd);
  if (own < 0) return make_error(errc::load_failed, path + ": dup: " + std::strerror(errno));
  __gnu_cxx::stdio_filebuf<char> buffer(own, std::ios::in);  // closes `own`
  std::istream in(&buffer);
  opened_module out;
  torch::jit::ExtraFilesMap extra{{"warm.json", ""}};
  try {
    out.module = torch::jit::load(in, torch::kCPU, extra);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto line = what.find('\n'); line != std::string::npos) what.resize(line);
    return make_error(errc::invalid_argument, path + ": not a TorchScript archive: " + what);
  }
  out.module.eval();
  auto forward = out.module.find_method("forward");
  if (!forward)
    return make_error(errc::invalid_argument, path + ": the module has no forward() method");
  const auto& schema = forward->function().getSchema();
  const auto& arguments = schema.arguments();
  for (std::size_t i = 1; i < arguments.size(); ++i) {  // 0 is self
    const auto& a = arguments[i];
    if (a.type()->kind() != c10::TypeKind::TensorType)
      return make_error(errc::invalid_argument, path + ": forward()'s parameter '" + a.name() +
                                                    "' is " + a.type()->str() +
                                                    "; warm passes tensors only");
    out.io.inputs.push_back({a.name(), dtype::f32, {}, false});
  }
  if (schema.returns().size() != 1)
    return make_error(errc::invalid_argument, path + ": forward() must return one value");
  for (auto& name : output_names(schema.returns().front().type()))
    out.io.outputs.push_back({name, dtype::f32, {}, false});
  if (auto& declared = extra["warm.json"]; !declared.empty())
    if (auto r = apply_declaration(declared, path, out.io); !r) return std::move(r).error();
  return out;
}

// Loads the archive at `where`, opened beneath its root.
expected<opened_module> open_module(const model_location& where) {
  auto file = open_located(where);
  if (!file) return std::move(file).error();
  return open_module_fd(file->descriptor(), where.path);
}

// Measures what a load takes: the bytes libtorch's CPU allocator hands out on this thread (and the
// intra-op threads it propagates to) while the meter is installed, live and at their peak.
// libtorch 1.13 keeps no statistics for CPU memory (its caching allocator with statistics is the
// CUDA one), but its CPU allocator reports each allocation and free to the thread's memory
// reporter, the hook PyTorch's own memory profiler uses: installing a meter there counts exactly
// the tensor storage a load makes (parameters, buffers, the archive's records, the warm-up's
// activations and workspace) with no cost to anything else the process runs. The interpreter's
// own small structures (code, graphs) are not tensors and go uncounted; a size hint covers models
// where they matter.
class allocation_meter final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, std::int64_t bytes, std::int64_t, std::int64_t,
                         c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU) return;
    auto live = live_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    auto peak = peak_.load(std::memory_order_relaxed);
    while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

  std::uint64_t peak() const {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, peak_.load()));
  }

 private:
  std::atomic<std::int64_t> live_{0};
  std::atomic<std::int64_t> peak_{0};
};

std::uint64_t tensor_bytes(const at::Tensor& t) {
  return static_cast<std::uint64_t>(t.numel()) * t.element_size();
}

// The bytes of the module's parameters and buffers.
std::uint64_t state_bytes(const torch::jit::Module& module) {
  std::uint64_t bytes = 0;
  for (const auto& p : module.parameters())
    bytes += tensor_bytes(p);
  for (const auto& b : module.buffers())
    bytes += tensor_bytes(b);
  return bytes;
}

// The line of a libtorch error that says what failed. The TorchScript interpreter's open with
// "The following operation failed in the TorchScript interpreter.", then a traceback, and end with
// the exception's own line ("RuntimeError: index 5 is out of bounds …"); other errors say it in
// their first line. At most 1000 characters.
std::string error_summary(const std::string& what) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= what.size()) {
    auto end = what.find('\n', start);
    if (end == std::string::npos) end = what.size();
    auto line = what.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
    start = end + 1;
  }
  if (lines.empty()) return "no reason given";
  auto& chosen = lines.front().find("TorchScript interpreter") != std::string::npos ? lines.back()
                                                                                    : lines.front();
  return chosen.size() > 1000 ? chosen.substr(0, 1000) + "…" : chosen;
}

class torchscript_model final : public resident_model {
 public:
  torchscript_model(const device& owner, opened_module opened, memory_reservation charged,
                    std::uint64_t parameters)
      : resident_model(owner, std::move(opened.io)),
        module_(std::move(opened.module)),
        charged_(std::move(charged)),
        parameters_(parameters) {}

  void measured(std::uint64_t bytes) { set_measured_bytes(bytes); }

  std::uint64_t bytes() const override { return charged_.bytes(); }
  void settle(memory_reservation more) override {
    assert(more.bytes() == shortfall() && "settling with a reservation that is not the shortfall");
    charged_.absorb(std::move(more));
    charged_.shrink_to(measured_bytes());
  }
  std::uint64_t max_batch() const override { return std::uint64_t{1} << 24; }
  std::uint64_t cost(std::uint64_t batch) const override {
    return parameters_ != 0 && batch > UINT64_MAX / parameters_ ? UINT64_MAX : batch * parameters_;
  }

  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                    std::uint64_t) const override {
    thread_local int threads_set = 0;
    if (int wanted = intra_op_threads.load(std::memory_order_relaxed); threads_set != wanted) {
      at::set_num_threads(wanted);  // per thread under OpenMP: set on each inference thread
      threads_set = wanted;
    }
    try {
      c10::InferenceMode inference;
      std::vector<c10::IValue> arguments;
      arguments.reserve(inputs.size());
      for (const auto& t : inputs) {
        auto type = torch_type(t.type);
        if (!type)
          return make_error(errc::invalid_argument, "input '" + t.name + "': dtype " +
                                                        std::string(to_string(t.type)) +
                                                        " is not one TorchScript models take");
        std::vector<std::int64_t> sizes(t.shape.begin(), t.shape.end());
        // The request's bytes, borrowed for the call: forward() sees them without a copy.
        auto* data = const_cast<std::byte*>(t.data.data());
        arguments.emplace_back(torch::from_blob(data, sizes, torch::TensorOptions().dtype(*type)));
      }
      auto result = module_.get_method("forward")(std::move(arguments));
      std::vector<at::Tensor> produced;
      bool single = false;
      if (result.isTensor()) {
        produced.push_back(result.toTensor());
        single = true;
      } else if (result.isTuple()) {
        for (const auto& e : result.toTupleRef().elements()) {
          if (!e.isTensor())
            return make_error(errc::load_failed, "forward() returned a tuple holding a non-tensor");
          produced.push_back(e.toTensor());
        }
      } else if (result.isTensorList()) {
        for (const auto& t : result.toTensorVector())
          produced.push_back(t);
      } else {
        return make_error(errc::load_failed,
                          "forward() returned " + result.tagKind() + ", not tensors");
      }
      std::vector<tensor> outputs;
      outputs.reserve(produced.size());
      for (std::size_t i = 0; i < produced.size(); ++i) {
        auto t = produced[i].contiguous();
        auto type = warm_type(t.scalar_type());
        if (!type)
          return make_error(errc::load_failed, "forward() returned a tensor of type " +
                                                   std::string(c10::toString(t.scalar_type())) +
                                                   ", which warm does not serve");
        tensor out;
        out.name = single ? "output" : "output_" + std::to_string(i);
        out.type = *type;
        for (auto d : t.sizes())
          out.shape.push_back(static_cast<std::uint64_t>(d));
        out.data.resize(tensor_bytes(t));
        std::memcpy(out.data.data(), t.data_ptr(), out.data.size());
        outputs.push_back(std::move(out));
      }
      return outputs;
    } catch (const std::exception& e) {
      return make_error(errc::invalid_argument,
                        "the model refused the inputs: " + error_summary(e.what()));
    }
  }

 private:
  // Not const in libtorch's API, though running forward() does not change the module.
  mutable torch::jit::Module module_;
  memory_reservation charged_;
  std::uint64_t parameters_;
};

// Zeros of the smallest shape each declared input takes (dynamic dimensions 1); nullopt when an
// input is not declared.
std::optional<std::vector<tensor>> warm_up_inputs(const model_io& io) {
  std::vector<tensor> inputs;
  for (const auto& spec : io.inputs) {
    if (!spec.known) return std::nullopt;
    tensor t;
    t.name = spec.name;
    t.type = spec.type;
    std::uint64_t elements = 1;
    for (auto d : spec.shape) {
      t.shape.push_back(d < 0 ? 1 : static_cast<std::uint64_t>(d));
      elements *= t.shape.back();
    }
    t.data.assign(elements * dtype_size(spec.type), std::byte{0});
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// What describe() says of an archive already open, in this process.
expected<model_description> describe_fd(int fd, const std::string& path, std::uint64_t file_size) {
  auto opened = open_module_fd(fd, path);
  if (!opened) return std::move(opened).error();
  model_description d;
  d.kind = "torchscript";
  d.io = std::move(opened->io);
  // The archive stores its tensors uncompressed: its size bounds the parameters and buffers
  // from above (plus code and pickles), the charge a load starts from.
  d.predicted_bytes = std::max(file_size, state_bytes(opened->module));
  return d;
}

class torchscript_backend final : public backend {
 public:
  std::string_view name() const override { return "torchscript"; }

  // Host devices of a process that allows in-process code only.
  bool runs_on(const device& dev) const override {
    return dev.host() && current_code_policy().in_process;
  }

  expected<model_description> describe(const model_location& where) const override {
    auto policy = current_code_policy();
    if (!policy.in_process) return describe_in_helper(where, policy);
    auto file = open_located(where);
    if (!file) return std::move(file).error();
    return describe_fd(file->descriptor(), where.path, file->size());
  }

  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) const override {
    auto started = std::chrono::steady_clock::now();
    // Everything libtorch allocates from here to the end of the warm-up is the model's: its
    // measured size is the peak, and replaces the reservation once the loader settles it (it
    // gives back the excess, or reserves the rest through the device actor, which may evict).
    if (!current_code_policy().in_process)
      return make_error(errc::load_failed,
                        where.path +
                            ": TorchScript models run in a model runtime here, not in this "
                            "process (in-process code is off)");
    auto meter = std::make_shared<allocation_meter>();
    c10::DebugInfoGuard metering(c10::DebugInfoKind::PROFILER_STATE, meter);
    auto opened = open_module(where);
    if (!opened) return make_error(errc::load_failed, opened.error().message);
    auto state = state_bytes(opened->module);
    std::uint64_t parameters = 0;
    for (const auto& p : opened->module.parameters())
      parameters += static_cast<std::uint64_t>(p.numel());
    auto warm_up = warm_up_inputs(opened->io);
    auto model = std::make_unique<torchscript_model>(dev, std::move(*opened),
                                                     std::move(reservation), parameters);
    if (warm_up) {
      auto batch = check_inputs(*warm_up, model->io(), model->max_batch());
      auto ran =
          batch ? model->run(*warm_up, *batch) : expected<std::vector<tensor>>(batch.error());
      if (!ran)
        return make_error(
            errc::load_failed,
            where.path + ": the warm-up inference on zeros failed: " + ran.error().message);
    }
    auto measured = std::max(meter->peak(), state);
    model->measured(measured);
    if (stats) {
      stats->bytes = measured;
      stats->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (stats->copied) stats->copied->store(measured, std::memory_order_relaxed);
    }
    return std::unique_ptr<resident_model>(std::move(model));
  }
};

}  // namespace

const backend* torchscript_backend_instance() {
  static const torchscript_backend instance;
  return &instance;
}

void set_torchscript_threads(int threads) {
  intra_op_threads.store(threads < 1 ? 1 : threads);
}

expected<model_description> describe_torchscript_fd(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(errc::load_failed, path + ": fstat: " + std::strerror(errno));
  return describe_fd(fd, path, static_cast<std::uint64_t>(st.st_size));
}

}  // namespace warm
