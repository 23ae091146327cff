// warm-bench evict: does evicting a large model stall the control plane?
//
// Two dense models of about `bytes` each (a, b) and a small one (probe) are registered on one
// host device with room for only one large model, so every load of a or b evicts the other and
// frees its weights. A prober thread runs status(probe) and inspect() in a closed loop for the
// whole run (a short pause between calls), timing each. Then `rounds` times, rotated so that each
// side runs first in every other round:
//   evicting  ensure_loaded(a), ensure_loaded(b), ... `evictions` loads in turn, each evicting
//             the other large model (its free runs while the next load waits for the bytes);
//   idle      nothing but the prober, for as long as the round's evicting phase took (or
//             `idle_seconds` when it runs first in the first round).
// Reported: p50/p99/max of status and inspect in each phase, the median load time, and
// ratio = status p99 evicting / status p99 idle (1 means evictions cost the control plane nothing).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double micros_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
}

// The prober's samples, by phase; written by the prober thread only while it runs.
struct samples {
  std::vector<double> status_us[2], inspect_us[2];  // [0] idle, [1] evicting
  std::string failure;
};

}  // namespace

int run_evict(const evict_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench evict: %s\n", message.c_str());
    return 1;
  };
  if (options.evictions < 1 || options.rounds < 1)
    return fail("--evictions and --rounds must be at least 1");

  scratch_dir dir("evict");
  const auto repo = dir.path() / "repo";
  std::uint64_t large_bytes = 0;
  for (const char* name : {"a", "b"}) {
    auto path = (repo / name / "1" / model_file_name).string();
    if (auto r = write_dense_model(path, {widths_for_bytes(options.bytes), activation::relu, 1});
        !r)
      return fail(r.error().to_string());
    auto file = open_model_file(path);
    if (!file) return fail(file.error().to_string());
    large_bytes = std::max(large_bytes, file->spec.data_bytes);
  }
  if (auto r = write_dense_model((repo / "probe" / "1" / model_file_name).string(),
                                 {{16, 8}, activation::relu, 1});
      !r)
    return fail(r.error().to_string());

  runtime_options ro;
  ro.devices = {"host:" + std::to_string(large_bytes + (std::uint64_t{1} << 20)) +
                "B"};  // one large model fits
  ro.repositories = {repo.string()};
  ro.state_dir = (dir.path() / "state").string();
  auto created = runtime::create(ro);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;
  for (const char* name : {"a", "b", "probe"})
    if (auto r = rt->register_model(name, model_info{name, {}, {}}).get(); !r)
      return fail(r.error().to_string());

  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  samples got;
  std::thread prober([&] {
    while (!stop.load()) {
      const int p = phase.load();
      auto before = clock_type::now();
      auto st = rt->status("probe").get();
      const double status_us = micros_since(before);
      before = clock_type::now();
      auto in = rt->inspect().get();
      const double inspect_us = micros_since(before);
      if (!st || !in) {
        got.failure = !st ? st.error().to_string() : in.error().to_string();
        return;
      }
      if (phase.load() == p) {  // a call that straddled a phase change counts for neither
        got.status_us[p].push_back(status_us);
        got.inspect_us[p].push_back(inspect_us);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  auto finish = [&] {
    stop = true;
    prober.join();
  };

  std::vector<double> load_ms;
  double last_evicting_s = options.idle_seconds;
  std::string error;
  for (int round = 0; round < options.rounds && error.empty(); ++round) {
    for (int side : rotated_order<int>({1, 0}, round)) {
      phase = side;
      if (side == 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(last_evicting_s));
        continue;
      }
      const auto start = clock_type::now();
      for (int i = 0; i < options.evictions && error.empty(); ++i) {
        const auto before = clock_type::now();
        auto r = rt->ensure_loaded(i % 2 ? "b" : "a", true).get();
        if (!r) error = r.error().to_string();
        load_ms.push_back(micros_since(before) / 1000);
      }
      last_evicting_s = std::chrono::duration<double>(clock_type::now() - start).count();
    }
  }
  finish();
  if (!error.empty()) return fail("a load failed: " + error);
  if (!got.failure.empty()) return fail("a control call failed: " + got.failure);
  for (int p : {0, 1})
    if (got.status_us[p].empty())
      return fail("the prober took no sample in a phase; raise --idle-seconds");
  auto fin = rt->inspect().get();
  std::uint64_t evicted = 0;
  if (fin)
    for (auto& d : fin->devices)
      evicted += d.evictions;
  rt.reset();

  nlohmann::ordered_json out{
      {"scenario", "evict"},
      {"bytes", large_bytes},
      {"evictions", evicted},
      {"rounds", options.rounds},
      {"load_ms_p50", median(load_ms)},
      {"status_p50_us_idle", percentile(got.status_us[0], 50)},
      {"status_p99_us_idle", percentile(got.status_us[0], 99)},
      {"status_max_us_idle", percentile(got.status_us[0], 100)},
      {"status_p50_us_evicting", percentile(got.status_us[1], 50)},
      {"status_p99_us_evicting", percentile(got.status_us[1], 99)},
      {"status_max_us_evicting", percentile(got.status_us[1], 100)},
      {"inspect_p99_us_idle", percentile(got.inspect_us[0], 99)},
      {"inspect_p99_us_evicting", percentile(got.inspect_us[1], 99)},
      {"inspect_max_us_evicting", percentile(got.inspect_us[1], 100)},
      {"samples_idle", got.status_us[0].size()},
      {"samples_evicting", got.status_us[1].size()},
      {"ratio", percentile(got.status_us[1], 99) / percentile(got.status_us[0], 99)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
