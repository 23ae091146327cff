// warm-bench registry: how many models one runtime can hold registered, and what that costs.
//
// One model file is written; `models` ids (m000000, m000001, ...) are registered, all naming it,
// issued back to back with the callback API from the calling thread and then awaited (each
// answer means the registration is durable in registry.db). Reported:
//   register_s, registrations_per_s  wall time of the whole batch, first call to last answer
//   bytes_per_model                  (VmRSS after registering - VmRSS after creating the runtime)
//                                    / models, both read after malloc_trim(0) so that heap the
//                                    burst used transiently (mailboxes, SQLite batches) and gave
//                                    back does not count; rss_*_mib give the raw readings
//   status_p50_us, status_p99_us     `queries` sequential status(id).get() on random ids
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// This process's resident set (VmRSS) in bytes; 0 if /proc is unreadable.
std::uint64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
  return 0;
}

std::uint64_t trimmed_resident_bytes() {
  ::malloc_trim(0);
  return resident_bytes();
}

std::string model_id(std::uint64_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "m%06llu", static_cast<unsigned long long>(i));
  return name;
}

constexpr double mib = 1024.0 * 1024.0;

}  // namespace

int run_registry(const registry_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench registry: %s\n", message.c_str());
    return 1;
  };
  if (options.models == 0) return fail("--models must be at least 1");

  scratch_dir dir("registry");
  const std::string path = "shared";
  if (auto r = write_dense_model((dir.path() / "repo" / path / "1" / model_file_name).string(),
                                 {{16, 8}, activation::relu, 1});
      !r)
    return fail(r.error().to_string());

  std::vector<std::string> ids;
  ids.reserve(options.models);
  for (std::uint64_t i = 0; i < options.models; ++i)
    ids.push_back(model_id(i));

  const auto rss_before = trimmed_resident_bytes();
  runtime_options ro;
  ro.devices = {"host:1GiB"};
  ro.repositories = {(dir.path() / "repo").string()};
  ro.state_dir = (dir.path() / "state").string();
  ro.max_models = options.models + 1;
  auto created = runtime::create(ro);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;
  const auto rss_created = trimmed_resident_bytes();

  std::atomic<std::uint64_t> errors{0};
  std::atomic<bool> have_error{false};
  std::string first_error;
  countdown answers(options.models);
  const auto start = clock_type::now();
  for (auto& id : ids) {
    rt->register_model(id, model_info{path, {}, {}}, false, false, [&](expected<void> r) {
      if (!r) {
        if (!have_error.exchange(true)) first_error = r.error().to_string();
        errors.fetch_add(1);
      }
      answers.arrive();
    });
  }
  if (!answers.wait(std::chrono::seconds(600)))
    return fail("registrations not all answered within 600 s");
  const double register_s = std::chrono::duration<double>(clock_type::now() - start).count();
  if (errors.load())
    return fail(std::to_string(errors.load()) + " registrations failed; first: " + first_error);
  const auto rss_untrimmed = resident_bytes();
  const auto rss_registered = trimmed_resident_bytes();

  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint64_t> pick(0, options.models - 1);
  std::vector<double> status_us;
  status_us.reserve(options.queries);
  for (std::uint64_t q = 0; q < options.queries; ++q) {
    const auto& id = ids[pick(rng)];
    auto before = clock_type::now();
    auto st = rt->status(id).get();
    status_us.push_back(
        std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
    if (!st) return fail(st.error().to_string());
    if (st->state != model_state::not_loaded)
      return fail("model '" + id + "' is " + std::string(to_string(st->state)));
  }
  // Models in use: each gets a model actor, a serving slot and 544 bytes on the device.
  std::uint64_t touched = std::min(options.touch, options.models);
  double touch_s = 0, bytes_per_loaded = 0;
  if (touched) {
    countdown loads(touched);
    const auto touch_start = clock_type::now();
    for (std::uint64_t i = 0; i < touched; ++i)
      rt->ensure_loaded(ids[i], true, [&](expected<void> r) {
        if (!r) errors.fetch_add(1);
        loads.arrive();
      });
    if (!loads.wait(std::chrono::seconds(600))) return fail("loads not all answered within 600 s");
    touch_s = std::chrono::duration<double>(clock_type::now() - touch_start).count();
    if (errors.load()) return fail(std::to_string(errors.load()) + " loads failed");
    bytes_per_loaded =
        (static_cast<double>(trimmed_resident_bytes()) - static_cast<double>(rss_registered)) /
        static_cast<double>(touched);
  }
  rt.reset();

  const double n = static_cast<double>(options.models);
  nlohmann::ordered_json out{
      {"scenario", "registry"},
      {"models", options.models},
      {"register_s", register_s},
      {"registrations_per_s", n / register_s},
      {"bytes_per_model",
       (static_cast<double>(rss_registered) - static_cast<double>(rss_created)) / n},
      {"status_p50_us", percentile(status_us, 50)},
      {"status_p99_us", percentile(status_us, 99)},
      {"queries", options.queries},
      {"rss_before_mib", static_cast<double>(rss_before) / mib},
      {"rss_created_mib", static_cast<double>(rss_created) / mib},
      {"rss_registered_mib", static_cast<double>(rss_registered) / mib},
      {"rss_registered_untrimmed_mib", static_cast<double>(rss_untrimmed) / mib}};
  if (touched) {
    out["loaded"] = touched;
    out["load_s"] = touch_s;
    out["bytes_per_loaded_model"] =
        bytes_per_loaded;  // actor, slot, weights (544 B) and bookkeeping
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace warm::bench
