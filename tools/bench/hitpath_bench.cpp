// warm-bench hitpath: what the cache costs on a hit, against calling the device directly.
//
// The same model file is loaded twice: into a warm::runtime (ensure_loaded, sync) and, for the
// baseline, onto a separate host device with device::load. Then `rounds` times, interleaved
// and rotated (each phase runs first in every third round: the machine is noisy), three phases of seconds / (3 x rounds) each, `threads` client threads
// in every phase, batch 1:
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

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;


// A call of the phase's kind, made by client thread `t`; false on an error or a miss.
using call_fn = std::function<bool(int t, std::string& why)>;


// Runs `threads` threads calling `call` for `seconds`, started together.
phase_result run_phase(int threads, double seconds, const call_fn& call) {
  std::vector<phase_tally> tallies(static_cast<std::size_t>(threads));  // failures: errors and misses
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  clock_type::time_point start, deadline;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto& mine = tallies[static_cast<std::size_t>(t)];
      mine.latencies_us.reserve(1 << 16);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::uint64_t n = 0;; ++n) {
        bool ok;
        std::string why;
        if ((n & 15) == 0) {  // check the deadline and sample latency every 16th call
          auto before = clock_type::now();
          if (before >= deadline) break;
          ok = call(t, why);
          mine.latencies_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
        } else {
          ok = call(t, why);
        }
        ++mine.calls;
        if (!ok && mine.failures++ == 0) mine.failure = why;
      }
      mine.end = clock_type::now();
    });
  }
  while (ready.load() != threads) std::this_thread::yield();
  start = clock_type::now();
  deadline = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();

  return merge_tallies(tallies, start, seconds);
}


}  // namespace

int run_hitpath(const hitpath_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench hitpath: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.threads < 1 || options.rounds < 1) return fail("--threads and --rounds must be at least 1");

  scratch_dir dir("hitpath");
  const std::string id = "hit";
  // The runtime, with the model resident.
  std::string path;
  auto created = loaded_single_model_runtime(dir, id, options.layers, &path);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;

  // The baseline: the same file on a device of its own.
  auto model = open_model_file(path);
  if (!model) return fail(model.error().to_string());
  device_spec baseline;  // fields by name: the spec's layout is not part of this bench
  baseline.type = device_spec::kind::host;
  baseline.capacity = model->spec.data_bytes;
  auto dev = make_device(baseline);
  if (!dev) return fail(dev.error().to_string());
  auto resident = (*dev)->load(*model);
  if (!resident) return fail(resident.error().to_string());

  const infer_request base{id, {random_input(model->spec.input_width())}};
  const auto& base_data = base.inputs.front().data;
  std::vector<float> direct_input(base_data.size() / sizeof(float));
  std::memcpy(direct_input.data(), base_data.data(), base_data.size());
  struct alignas(64) output_buffer {
    std::vector<float> values;
  };
  std::vector<output_buffer> direct_output(static_cast<std::size_t>(options.threads));

  call_fn direct = [&](int t, std::string& why) {
    auto r = (*dev)->infer(**resident, direct_input.data(), direct_input.size(), 1,
                           direct_output[static_cast<std::size_t>(t)].values);
    if (!r) why = r.error().to_string();
    return bool(r);
  };

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
      while (!a.done.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    if (!a.ok) why = a.why;
    return a.ok;
  };

  call_fn warm_future = [&](int, std::string& why) {
    auto r = rt->infer(base).get();
    if (!r) why = r.error().to_string();
    else if (!r->cache_hit) why = "a resident model missed";
    return r && r->cache_hit;
  };

  const double phase_seconds = options.seconds / (3.0 * options.rounds);
  std::vector<double> direct_rps, warm_rps, future_rps, ratios, warm_latencies;
  for (int round = 0; round < options.rounds; ++round) {
    double round_direct = 0, round_warm = 0;
    for (auto* phase : rotated_order<decltype(&direct)>({&direct, &warm_callback, &warm_future}, round)) {
      auto result = run_phase(options.threads, phase_seconds, *phase);
      if (result.failures) return fail(std::to_string(result.failures) + " calls failed; first: " + result.failure);
      if (std::getenv("WARM_BENCH_VERBOSE"))
        std::fprintf(stderr, "round %d %s %.0f rps\n", round,
                     phase == &direct ? "direct" : phase == &warm_callback ? "warm" : "future", result.rps);
      if (phase == &direct) {
        direct_rps.push_back(round_direct = result.rps);
      } else if (phase == &warm_future) {
        future_rps.push_back(result.rps);
      } else {
        warm_rps.push_back(round_warm = result.rps);
        warm_latencies.insert(warm_latencies.end(), result.latencies_us.begin(), result.latencies_us.end());
      }
    }
    ratios.push_back(round_warm / round_direct);
  }
  resident->reset();
  rt.reset();
  std::uint64_t deferred = 0;
  for (auto& a : answers) deferred += a.deferred;

  nlohmann::ordered_json out{{"scenario", "hitpath"},
                             {"layers", options.layers},
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
