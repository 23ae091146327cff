// warm-bench hitpath: what the cache costs on a hit, against calling the device directly.
//
// The same model file is loaded twice: into a warm::runtime (ensure_loaded, sync) and, for the
// baseline, onto a separate host device with device::load. Then `rounds` times, interleaved
// and rotated (each phase runs first in every third round: the machine is noisy), three phases of
// seconds / (3 x rounds) each, `threads` client threads in every phase, batch 1:
//   direct       device::infer(resident, input, output) in a loop — the floor;
//   warm         runtime::infer(request, callback): a hit runs the inference and the callback
//                inline on the calling thread; the request (its input tensor) is copied per
//                call, as a caller of the by-value API must;
//   warm_future  runtime::infer(request).get(): the same through a promise/future.
// Every 16th call is timed with steady_clock for latency. Reported: the median over rounds of
// each phase's requests/s, ratio = the median over rounds of warm_rps / direct_rps (each pair saw
// the same machine state), and p50/p99 of the warm (callback) phase's sampled latencies. A call
// that misses (the model was not resident) or fails makes the run fail; `deferred` counts
// callback-form calls answered after infer() returned (a hit taken through the actors instead of
// inline: expected 0). WARM_BENCH_VERBOSE=1 prints every phase's requests/s to stderr.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/device.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"
#ifdef WARM_BENCH_TORCH
#include "torch_direct.hpp"
#endif

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// A call of the phase's kind, made by client thread `t`; false on an error or a miss.
using call_fn = std::function<bool(int t, std::string& why)>;

// Runs `threads` threads calling `call` for `seconds`, started together.
phase_result run_phase(int threads, double seconds, const call_fn& call) {
  std::vector<phase_tally> tallies(
      static_cast<std::size_t>(threads));  // failures: errors and misses
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  clock_type::time_point start, deadline;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto& mine = tallies[static_cast<std::size_t>(t)];
      mine.latencies_us.reserve(1 << 16);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      for (std::uint64_t n = 0;; ++n) {
        bool ok;
        std::string why;
        if ((n & 15) == 0) {  // check the deadline and sample latency every 16th call
          auto before = clock_type::now();
          if (before >= deadline) break;
          ok = call(t, why);
          mine.latencies_us.push_back(
              std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
        } else {
          ok = call(t, why);
        }
        ++mine.calls;
        if (!ok && mine.failures++ == 0) mine.failure = why;
      }
      mine.end = clock_type::now();
    });
  }
  while (ready.load() != threads)
    std::this_thread::yield();
  start = clock_type::now();
  deadline = start + std::chrono::duration_cast<clock_type::duration>(
                         std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();

  return merge_tallies(tallies, start, seconds);
}

// The model under test, resident in a runtime, and the baseline that runs it without warm.
struct hit_setup {
  std::unique_ptr<runtime> rt;
  infer_request base;              // the request every call sends
  call_fn direct;                  // the floor: the same model run directly
  std::shared_ptr<void> baseline;  // what `direct` runs on, released before the runtime
  nlohmann::ordered_json model;    // what the JSON says about the model
};

// A dense model of these widths: the baseline is device::infer on the same file loaded onto a
// separate host device.
expected<hit_setup> dense_setup(const scratch_dir& dir, const hitpath_options& options) {
  hit_setup s;
  const std::string id = "hit";
  std::string path;
  auto created = loaded_single_model_runtime(dir, id, options.layers, &path);
  if (!created) return std::move(created).error();
  s.rt = std::move(*created);
  auto model = open_model_file(path);
  if (!model) return std::move(model).error();
  device_spec baseline;  // fields by name: the spec's layout is not part of this bench
  baseline.type = device_spec::kind::host;
  baseline.capacity = model->spec.data_bytes;
  auto dev = make_device(baseline);
  if (!dev) return std::move(dev).error();
  auto resident = (*dev)->load(*model);
  if (!resident) return std::move(resident).error();
  s.base = {id, {random_input(model->spec.input_width())}};
  struct state {
    std::unique_ptr<device> dev;
    std::unique_ptr<dense_resident> resident;
    std::vector<float> input;
    std::vector<std::vector<float>> outputs;  // one per client thread
  };
  auto st = std::make_shared<state>();
  const auto& data = s.base.inputs.front().data;
  st->input.resize(data.size() / sizeof(float));
  std::memcpy(st->input.data(), data.data(), data.size());
  st->outputs.resize(static_cast<std::size_t>(options.threads));
  st->dev = std::move(*dev);
  st->resident = std::move(*resident);
  s.direct = [st](int t, std::string& why) {
    auto r = st->dev->infer(*st->resident, st->input.data(), st->input.size(), 1,
                            st->outputs[static_cast<std::size_t>(t)]);
    if (!r) why = r.error().to_string();
    return bool(r);
  };
  s.baseline = st;
  s.model = {{"backend", "dense"}, {"layers", options.layers}};
  return s;
}

#ifdef WARM_BENCH_TORCH
// The small CNN of tools/torch_models.py (made by /usr/bin/python3 with torch): the baseline is
// the same file loaded with torch::jit::load and its forward() called directly.
expected<hit_setup> torchscript_setup(const scratch_dir& dir, const hitpath_options&) {
  auto repo = (dir.path() / "repo").string();
  auto command = "/usr/bin/python3 " WARM_SOURCE_ROOT "/tools/torch_models.py " + repo + " >&2";
  if (std::system(command.c_str()) != 0)
    return make_error(errc::unavailable,
                      "tools/torch_models.py failed (is python3-torch installed?)");
  hit_setup s;
  runtime_options o;
  o.repositories = {repo};
  o.state_dir = (dir.path() / "state").string();
  o.devices = {"host:256MiB"};
  auto created = runtime::create(o);
  if (!created) return std::move(created).error();
  s.rt = std::move(*created);
  if (auto r = s.rt->register_model("cnn", model_info("cnn")).get(); !r)
    return std::move(r).error();
  if (auto r = s.rt->ensure_loaded("cnn", true).get(); !r) return std::move(r).error();
  auto direct = torch_direct::load(repo + "/cnn/1/model.pt");
  if (!direct) return std::move(direct).error();
  tensor image{"image", dtype::f32, {1, 3, 8, 8}, {}};
  image.data = random_input(3 * 8 * 8).data;
  s.base = {"cnn", {image}};
  std::shared_ptr<torch_direct> module = std::move(*direct);
  s.direct = [module, inputs = s.base.inputs](int, std::string& why) {
    return module->run(inputs, why);
  };
  s.baseline = module;
  s.model = {{"backend", "torchscript"}, {"model", "cnn [1, 3, 8, 8] -> [1, 10]"}};
  return s;
}
#endif

}  // namespace

int run_hitpath(const hitpath_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench hitpath: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.threads < 1 || options.rounds < 1)
    return fail("--threads and --rounds must be at least 1");

  scratch_dir dir("hitpath");
  expected<hit_setup> setup =
      make_error(errc::invalid_argument, "--backend is dense or torchscript");
  if (options.backend == "dense") setup = dense_setup(dir, options);
#ifdef WARM_BENCH_TORCH
  if (options.backend == "torchscript") setup = torchscript_setup(dir, options);
#else
  if (options.backend == "torchscript")
    setup = make_error(errc::unavailable, "this build has no TorchScript backend");
#endif
  if (!setup) return fail(setup.error().to_string());
  auto& rt = setup->rt;
  const auto& base = setup->base;
  call_fn& direct = setup->direct;

  // Callback form: a hit on the route table answers inline. An answer that comes later (through
  // the actors, on another thread) is waited for and counted as deferred; cache_hit false (the
  // model had to be loaded) fails the run.
  struct alignas(64) answer {
    std::atomic<bool> done{false};
    bool ok = false;
    std::string why;
    std::uint64_t deferred = 0;  // answers that came after infer() returned (not inline)
  };
  std::vector<answer> answers(static_cast<std::size_t>(options.threads));
  call_fn warm_callback = [&](int t, std::string& why) {
    auto& a = answers[static_cast<std::size_t>(t)];
    a.done.store(false, std::memory_order_relaxed);
    rt->infer(base, [&a](expected<infer_result> r) {
      a.ok = r && r->cache_hit;
      if (!a.ok) a.why = r ? "a resident model missed" : r.error().to_string();
      a.done.store(true, std::memory_order_release);
    });
    if (!a.done.load(std::memory_order_acquire)) {
      ++a.deferred;
      while (!a.done.load(std::memory_order_acquire))
        std::this_thread::yield();
    }
    if (!a.ok) why = a.why;
    return a.ok;
  };

  call_fn warm_future = [&](int, std::string& why) {
    auto r = rt->infer(base).get();
    if (!r)
      why = r.error().to_string();
    else if (!r->cache_hit)
      why = "a resident model missed";
    return r && r->cache_hit;
  };

  const double phase_seconds = options.seconds / (3.0 * options.rounds);
  std::vector<double> direct_rps, warm_rps, future_rps, ratios, warm_latencies;
  for (int round = 0; round < options.rounds; ++round) {
    double round_direct = 0, round_warm = 0;
    for (auto* phase :
         rotated_order<decltype(&direct)>({&direct, &warm_callback, &warm_future}, round)) {
      auto result = run_phase(options.threads, phase_seconds, *phase);
      if (result.failures)
        return fail(std::to_string(result.failures) + " calls failed; first: " + result.failure);
      if (std::getenv("WARM_BENCH_VERBOSE"))
        std::fprintf(stderr, "round %d %s %.0f rps\n", round,
                     phase == &direct          ? "direct"
                     : phase == &warm_callback ? "warm"
                                               : "future",
                     result.rps);
      if (phase == &direct) {
        direct_rps.push_back(round_direct = result.rps);
      } else if (phase == &warm_future) {
        future_rps.push_back(result.rps);
      } else {
        warm_rps.push_back(round_warm = result.rps);
        warm_latencies.insert(warm_latencies.end(), result.latencies_us.begin(),
                              result.latencies_us.end());
      }
    }
    ratios.push_back(round_warm / round_direct);
  }
  setup->baseline.reset();
  rt.reset();
  std::uint64_t deferred = 0;
  for (auto& a : answers)
    deferred += a.deferred;

  nlohmann::ordered_json out{{"scenario", "hitpath"},
                             {"model", setup->model},
                             {"threads", options.threads},
                             {"direct_rps", median(direct_rps)},
                             {"warm_rps", median(warm_rps)},
                             {"warm_future_rps", median(future_rps)},
                             {"ratio", median(ratios)},
                             {"p50_us", percentile(warm_latencies, 50)},
                             {"p99_us", percentile(warm_latencies, 99)},
                             {"rounds", options.rounds},
                             {"deferred", deferred}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
