// warm-bench batch: what dynamic batching buys concurrent clients of one model.
//
// One runtime serves two copies of the same model (1024 -> 1024 -> 1024 by default, 8 MiB of
// weights, loaded before timing): "batched" registered with its own batching options
// (--max-batch, --max-queue-delay), "plain" with max_batch 0 (never batched, not even
// automatically). Both
// run on the runtime's inference threads (the hit-path inline limit is warmd's), so the two
// phases differ in batching alone. `clients` threads each send batch-1 inferences in a closed
// loop (the next request when the last is answered), at one model per phase; phases alternate,
// the first rotated between rounds, so drift in the machine's speed falls on both. Reported:
//   rps_on, rps_off     requests per second, medians over rounds
//   ratio               rps_on / rps_off
//   p99_us_on/off       99th percentile latency over every request of the phase kind
//   p99_ratio           p99_us_on / p99_us_off (the target: no worse than 2)
//   rows_per_pass       mean rows of the batched passes
//   passes_up_to_rows   the share of the batched passes with at most 1, 2, 4, ... rows
// And the ceiling batching works toward, measured in the same rounds on a device of its own with
// the same model: `threads` threads (as many as the runtime's inference threads) each calling
// device::infer in a loop, at batch 1 and at max_batch, with no runtime between (three more phases
// a round, as long as the runtime's: the run takes 2.5 times --seconds):
//   threads                  inference threads (the runtime's, and the ceiling's)
//   exec_rows_per_s_1        rows per second at batch 1, median over rounds
//   exec_rows_per_s_max      rows per second at max_batch, median over rounds
//   ceiling                  exec_rows_per_s_max / exec_rows_per_s_1
//   of_ceiling               ratio / ceiling: the share of the ceiling batching reaches
//   exec_batch_clients       clients / threads rows (at most max_batch): the largest passes the
//                            clients can fill when every thread runs one
//   exec_rows_per_s_clients  rows per second at exec_batch_clients, median over rounds
//   ceiling_clients          exec_rows_per_s_clients / exec_rows_per_s_1
// Where the time goes, from the process's CPU time and context switches (getrusage) over each
// phase, clients and runtime together, medians over rounds:
//   cpu_us_per_request_on/off     CPU time per answered request (both cores' worth)
//   exec_cpu_us_per_row_1/clients CPU time per row of the ceiling's phases at batch 1 and at
//                                 exec_batch_clients rows
//   overhead_us_on/off            what a request costs beyond its rows' arithmetic:
//                                 cpu_us_per_request_on - exec_cpu_us_per_row_clients, and
//                                 cpu_us_per_request_off - exec_cpu_us_per_row_1
//   switches_per_request_on/off   context switches (voluntary and not) per answered request
//   idle_on/off                   the share of the cores' time the process did not use
// A request that fails, or a phase without answers, exits non-zero.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/dense_model.hpp"
#include "warm/device.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// The process's CPU time (user + system, seconds) and context switches so far.
struct usage {
  double cpu = 0;
  double switches = 0;
};
usage usage_now() {
  rusage r{};
  ::getrusage(RUSAGE_SELF, &r);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {seconds(r.ru_utime) + seconds(r.ru_stime),
          static_cast<double>(r.ru_nvcsw) + static_cast<double>(r.ru_nivcsw)};
}

// What a phase used: CPU seconds and switches between `before` and now, and the wall seconds.
struct phase_usage {
  double cpu = 0, switches = 0, wall = 0;
};
phase_usage used_since(const usage& before, clock_type::time_point start) {
  auto now = usage_now();
  return {now.cpu - before.cpu, now.switches - before.switches,
          std::chrono::duration<double>(clock_type::now() - start).count()};
}

// `clients` closed-loop threads against `model` for `seconds`.
phase_result run_phase(runtime& rt, const std::string& model, const tensor& input, int clients,
                       double seconds) {
  std::vector<phase_tally> tallies(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(seconds));
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      auto& t = tallies[static_cast<std::size_t>(c)];
      infer_request request{model, {input}};
      while (clock_type::now() < deadline) {
        auto sent = clock_type::now();
        auto r = rt.infer(request).get();
        if (!r) {
          ++t.failures;
          if (t.failure.empty()) t.failure = r.error().to_string();
          continue;
        }
        ++t.calls;
        t.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - sent).count());
      }
      t.end = clock_type::now();
    });
  for (auto& th : threads)
    th.join();
  return merge_tallies(tallies, start, seconds);
}

// `threads` threads each running `model` on `dev` at `batch` rows in a loop for `seconds`, with no
// runtime between; rows per second, all threads together.
expected<double> exec_phase(device& dev, const dense_resident& model, std::uint64_t width,
                            std::uint64_t batch, unsigned threads, double seconds) {
  std::vector<std::uint64_t> calls(threads);
  std::vector<std::optional<error>> failed(threads);
  std::vector<std::thread> running;
  const auto input = random_input(width, 5);
  const auto* row = reinterpret_cast<const float*>(input.data.data());
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(seconds));
  for (unsigned t = 0; t < threads; ++t)
    running.emplace_back([&, t] {
      std::vector<float> in, out;
      for (std::uint64_t r = 0; r < batch; ++r)
        in.insert(in.end(), row, row + width);
      while (clock_type::now() < deadline) {
        if (auto r = dev.infer(model, in.data(), in.size(), batch, out); !r) {
          failed[t] = r.error();
          return;
        }
        ++calls[t];
      }
    });
  for (auto& th : running)
    th.join();
  for (auto& f : failed)
    if (f) return *f;
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  std::uint64_t total = 0;
  for (auto c : calls)
    total += c;
  return static_cast<double>(total * batch) / elapsed;
}

// The share of the batched passes between two readings that had at most each bound's rows
// ({"1": ..., "2": ..., "4": ...}, up to max_batch).
nlohmann::ordered_json passes_up_to(const histogram::reading& before,
                                    const histogram::reading& after) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const auto count = after.count - before.count;
  for (std::size_t b = 0; b < after.upper_bounds.size() && count > 0; ++b) {
    out[std::to_string(static_cast<std::uint64_t>(after.upper_bounds[b]))] =
        static_cast<double>(after.cumulative[b] - before.cumulative[b]) /
        static_cast<double>(count);
    if (after.cumulative[b] - before.cumulative[b] == count) break;
  }
  return out;
}

}  // namespace

int run_batch(const batch_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench batch: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.clients < 1 || options.rounds < 1)
    return fail("--clients and --rounds must be at least 1");
  if (options.max_batch < 2) return fail("--max-batch must be at least 2");

  scratch_dir dir("batch");
  const auto repo = dir.path() / "repo";
  for (const char* id : {"batched", "plain"})
    if (auto r = write_dense_model((repo / id / "1" / model_file_name).string(),
                                   {options.layers, activation::relu, 1});
        !r)
      return fail(r.error().to_string());
  runtime_options ro;
  ro.devices = {options.device + ":" +
                std::to_string(std::max<std::uint64_t>(std::uint64_t{1} << 30,
                                                       4 * dense_data_bytes(options.layers)))};
  ro.repositories = {repo.string()};
  ro.state_dir = (dir.path() / "state").string();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  ro.inference_threads = threads;  // the runtime's default, named: the ceiling runs as many
  ro.inline_inference_limit =
      (256 * 256 + 256) * 16;  // warmd's default: these hits run on the inference threads
  auto created = runtime::create(ro);
  if (!created) return fail(created.error().to_string());
  auto& rt = **created;
  model_info batched("batched");
  batched.batching = batching_options{};
  batched.batching->max_batch = options.max_batch;
  batched.batching->max_queue_delay = options.max_queue_delay;
  model_info plain("plain");
  plain.batching = batching_options{};  // max_batch 0: never batched, automatically or not
  for (auto [id, info] : {std::pair{"batched", batched}, std::pair{"plain", plain}}) {
    if (auto r = rt.register_model(id, info, true, true).get(); !r)
      return fail(std::string(id) + ": " + r.error().to_string());
  }

  // The ceiling's own copy of the model, on a device of its own (the runtime's blas_threads, 1,
  // holds for it too: the setting is process-wide).
  auto file = open_model_file((repo / "batched" / "1" / model_file_name).string());
  if (!file) return fail(file.error().to_string());
  auto spec = parse_device_spec(options.device);
  if (!spec) return fail(spec.error().to_string());
  spec->capacity = file->spec.data_bytes + (std::uint64_t{64} << 20);
  auto dev = make_device(*spec);
  if (!dev) return fail(dev.error().to_string());
  auto resident = (*dev)->load(*file);
  if (!resident) return fail(resident.error().to_string());
  const auto clients_batch = std::min<std::uint64_t>(
      options.max_batch, (static_cast<std::uint64_t>(options.clients) + threads - 1) / threads);

  const auto input = random_input(options.layers.front(), 3);
  const double phase_seconds = options.seconds / (2.0 * options.rounds);
  std::vector<double> rps_on, rps_off, lat_on, lat_off, exec_1, exec_max, exec_clients;
  std::vector<double> cpu_on, cpu_off, cpu_row_1, cpu_row_clients, switches_on, switches_off,
      idle_on, idle_off;
  const auto passes_before = rt.metrics().batch_rows.read();
  for (int round = 0; round < options.rounds; ++round) {
    // The ceiling's phases first, in rotated order, each as long as a runtime phase.
    const std::vector<std::pair<std::uint64_t, std::vector<double>*>> execs{
        {1, &exec_1}, {options.max_batch, &exec_max}, {clients_batch, &exec_clients}};
    for (const auto& [rows, into] : rotated_order(execs, round)) {
      const auto before = usage_now();
      const auto start = clock_type::now();
      auto rate =
          exec_phase(**dev, **resident, options.layers.front(), rows, threads, phase_seconds);
      if (!rate)
        return fail("exec at batch " + std::to_string(rows) + ": " + rate.error().to_string());
      into->push_back(*rate);
      const auto used = used_since(before, start);
      if (into == &exec_1) cpu_row_1.push_back(1e6 * used.cpu / (*rate * used.wall));
      if (into == &exec_clients) cpu_row_clients.push_back(1e6 * used.cpu / (*rate * used.wall));
    }
    for (int k = 0; k < 2; ++k) {
      const bool on = (k + round) % 2 == 0;
      const auto before = usage_now();
      const auto start = clock_type::now();
      auto phase = run_phase(rt, on ? "batched" : "plain", input, options.clients, phase_seconds);
      const auto used = used_since(before, start);
      const double answered = phase.rps * used.wall;
      if (answered > 0) {
        (on ? cpu_on : cpu_off).push_back(1e6 * used.cpu / answered);
        (on ? switches_on : switches_off).push_back(used.switches / answered);
        (on ? idle_on : idle_off).push_back(1 - used.cpu / (used.wall * threads));
      }
      if (phase.failures)
        return fail(std::to_string(phase.failures) + " requests failed; first: " + phase.failure);
      if (phase.latencies_us.empty()) return fail("a phase had no answers");
      (on ? rps_on : rps_off).push_back(phase.rps);
      auto& lat = on ? lat_on : lat_off;
      lat.insert(lat.end(), phase.latencies_us.begin(), phase.latencies_us.end());
    }
  }
  const auto passes = rt.metrics().batch_rows.read();
  const double on = median(rps_on), off = median(rps_off);
  const double p99_on = percentile(lat_on, 99), p99_off = percentile(lat_off, 99);
  const auto pass_count = passes.count - passes_before.count;
  const double e1 = median(exec_1), emax = median(exec_max), eclients = median(exec_clients);
  const double ratio = off > 0 ? on / off : 0.0, ceiling = e1 > 0 ? emax / e1 : 0.0;
  nlohmann::ordered_json out{
      {"scenario", "batch"},
      {"device", options.device},
      {"rps_on", on},
      {"rps_off", off},
      {"ratio", ratio},
      {"p99_us_on", p99_on},
      {"p99_us_off", p99_off},
      {"p99_ratio", p99_off > 0 ? p99_on / p99_off : 0.0},
      {"p50_us_on", percentile(lat_on, 50)},
      {"p50_us_off", percentile(lat_off, 50)},
      {"rows_per_pass",
       pass_count ? (passes.sum - passes_before.sum) / static_cast<double>(pass_count) : 0.0},
      {"passes_up_to_rows", passes_up_to(passes_before, passes)},
      {"clients", options.clients},
      {"max_batch", options.max_batch},
      {"max_queue_delay_us", options.max_queue_delay.count()},
      {"layers", options.layers},
      {"rounds", options.rounds},
      {"seconds", options.seconds},
      {"threads", threads},
      {"exec_rows_per_s_1", e1},
      {"exec_rows_per_s_max", emax},
      {"ceiling", ceiling},
      {"of_ceiling", ceiling > 0 ? ratio / ceiling : 0.0},
      {"exec_batch_clients", clients_batch},
      {"exec_rows_per_s_clients", eclients},
      {"ceiling_clients", e1 > 0 ? eclients / e1 : 0.0},
      {"cpu_us_per_request_on", median(cpu_on)},
      {"cpu_us_per_request_off", median(cpu_off)},
      {"exec_cpu_us_per_row_1", median(cpu_row_1)},
      {"exec_cpu_us_per_row_clients", median(cpu_row_clients)},
      {"overhead_us_on", median(cpu_on) - median(cpu_row_clients)},
      {"overhead_us_off", median(cpu_off) - median(cpu_row_1)},
      {"switches_per_request_on", median(switches_on)},
      {"switches_per_request_off", median(switches_off)},
      {"idle_on", median(idle_on)},
      {"idle_off", median(idle_off)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
