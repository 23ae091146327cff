// warm-bench rollout: what rolling a served model forward costs the clients that use it.
//
// One runtime serves model "m" from its directory (latest:1, --load-policy). `clients` threads
// send batch-1 inferences to "m" in a closed loop for the whole run, each request tagged with when
// it was sent. The main thread alternates two kinds of window, `rounds` times: a steady window
// (--steady-ms, nothing changes), then a roll: a new version's directory is written elsewhere and
// renamed into the model's directory, and the window lasts until that version is the default, the
// old one is gone and nothing is moving. Requests are counted in the window they were sent in.
// Reported:
//   rps_steady, rps_roll        requests answered per second of each kind of window
//   p99_us_steady, p99_us_roll  99th percentile latency over the requests of each kind
//   p99_ratio                   p99_us_roll / p99_us_steady (the target: no worse than 2)
//   roll_ms                     median time from the rename to the roll's end (includes the
//                               settle time and a poll: --settle-ms, --poll-ms)
//   failed_roll, failed_steady  requests that failed; availability-preserving must fail none
//                               (exit 1 otherwise); resource-preserving reports its gap here
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/dense_model.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct sample {
  clock_type::time_point sent;
  double latency_us = 0;
  bool failed = false;
};

struct window {
  clock_type::time_point begin, end;
  bool roll = false;
};

// Whether the roll to `version` is over: it is the default, the only version, nothing moving.
bool rolled(runtime& rt, std::uint64_t version) {
  auto all = rt.served().get();
  if (!all || all->empty()) return false;
  auto& s = all->front();
  return s.default_version == version && s.versions.size() == 1 &&
         s.versions[0].version == version && !s.rolling;
}

}  // namespace

int run_rollout(const rollout_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench rollout: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.clients < 1 || options.rounds < 1)
    return fail("--clients and --rounds must be at least 1");
  auto loading = parse_load_policy(options.load_policy);
  if (!loading) return fail(loading.error().message);

  scratch_dir dir("rollout");
  const auto repo = dir.path() / "repo";
  const auto staging = dir.path() / "staging";
  auto write_version = [&](std::uint64_t v) -> expected<void> {
    auto where = staging / std::to_string(v);
    if (auto r = write_dense_model((where / model_file_name).string(),
                                   {options.layers, activation::relu, v});
        !r)
      return r;
    std::error_code ec;
    std::filesystem::create_directories(repo / "m", ec);
    std::filesystem::rename(where, repo / "m" / std::to_string(v), ec);  // into place at once
    if (ec) return make_error(errc::internal, "rename: " + ec.message());
    return {};
  };
  if (auto r = write_version(1); !r) return fail(r.error().to_string());

  runtime_options ro;
  ro.devices = {"host:" + std::to_string(std::max<std::uint64_t>(
                              std::uint64_t{1} << 30, 4 * dense_data_bytes(options.layers)))};
  ro.repositories = {repo.string()};
  ro.state_dir = (dir.path() / "state").string();
  ro.version_poll = std::chrono::milliseconds(options.poll_ms);
  ro.version_settle = std::chrono::milliseconds(options.settle_ms);
  auto created = runtime::create(ro);
  if (!created) return fail(created.error().to_string());
  auto& rt = **created;
  served_model_config m;
  m.name = "m";
  m.loading = *loading;
  if (auto r = rt.serve({{m}}).get(); !r) return fail(r.error().to_string());
  const auto ready_by = clock_type::now() + std::chrono::seconds(30);
  while (!rolled(rt, 1)) {
    if (clock_type::now() > ready_by) return fail("version 1 was not served within 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  const auto input = random_input(options.layers.front(), 3);
  std::atomic<bool> stop{false};
  std::vector<std::vector<sample>> samples(static_cast<std::size_t>(options.clients));
  std::vector<std::thread> clients;
  for (int c = 0; c < options.clients; ++c)
    clients.emplace_back([&, c] {
      auto& mine = samples[static_cast<std::size_t>(c)];
      infer_request request{"m", {input}};
      while (!stop.load(std::memory_order_relaxed)) {
        auto sent = clock_type::now();
        auto r = rt.infer(request).get();
        mine.push_back({sent,
                        std::chrono::duration<double, std::micro>(clock_type::now() - sent).count(),
                        !r});
      }
    });

  std::vector<window> windows;
  std::vector<double> roll_ms;
  std::string problem;
  for (int round = 0; round < options.rounds && problem.empty(); ++round) {
    auto begin = clock_type::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(options.steady_ms));
    windows.push_back({begin, clock_type::now(), false});
    const auto version = static_cast<std::uint64_t>(round + 2);
    begin = clock_type::now();
    if (auto r = write_version(version); !r) {
      problem = r.error().to_string();
      break;
    }
    const auto limit = begin + std::chrono::seconds(30);
    while (!rolled(rt, version)) {
      if (clock_type::now() > limit) {
        problem = "the roll to version " + std::to_string(version) + " did not end within 30 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    windows.push_back({begin, clock_type::now(), true});
    roll_ms.push_back(
        std::chrono::duration<double, std::milli>(windows.back().end - begin).count());
  }
  stop = true;
  for (auto& t : clients)
    t.join();
  if (!problem.empty()) return fail(problem);

  std::vector<double> lat[2];
  std::uint64_t failed[2] = {0, 0};
  double seconds[2] = {0, 0};
  for (auto& w : windows)
    seconds[w.roll] += std::chrono::duration<double>(w.end - w.begin).count();
  for (auto& mine : samples)
    for (auto& s : mine)
      for (auto& w : windows)
        if (s.sent >= w.begin && s.sent < w.end) {
          if (s.failed)
            ++failed[w.roll];
          else
            lat[w.roll].push_back(s.latency_us);
          break;
        }
  if (lat[0].empty() || lat[1].empty()) return fail("a kind of window had no answers");
  const double p99_steady = percentile(lat[0], 99), p99_roll = percentile(lat[1], 99);
  nlohmann::ordered_json out{{"scenario", "rollout"},
                             {"load_policy", options.load_policy},
                             {"rps_steady", static_cast<double>(lat[0].size()) / seconds[0]},
                             {"rps_roll", static_cast<double>(lat[1].size()) / seconds[1]},
                             {"p99_us_steady", p99_steady},
                             {"p99_us_roll", p99_roll},
                             {"p99_ratio", p99_steady > 0 ? p99_roll / p99_steady : 0.0},
                             {"p50_us_steady", percentile(lat[0], 50)},
                             {"p50_us_roll", percentile(lat[1], 50)},
                             {"roll_ms", median(roll_ms)},
                             {"failed_steady", failed[0]},
                             {"failed_roll", failed[1]},
                             {"requests_roll", lat[1].size() + failed[1]},
                             {"clients", options.clients},
                             {"layers", options.layers},
                             {"rounds", options.rounds},
                             {"steady_ms", options.steady_ms},
                             {"poll_ms", options.poll_ms},
                             {"settle_ms", options.settle_ms}};
  std::printf("%s\n", out.dump().c_str());
  if (*loading == load_policy::availability_preserving && (failed[0] || failed[1]))
    return fail("requests failed during an availability-preserving roll");
  return 0;
}

}  // namespace warm::bench
