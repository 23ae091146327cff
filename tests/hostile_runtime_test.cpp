// A model runtime is not trusted (it runs models' code): a fake one (support/fake_runtime) answers
// warmd's remote_device, driven through warm::runtime, with outputs that break the load's
// declaration, shapes whose bytes overflow, a status listing more models than any runtime holds,
// numbers no runtime could mean, and a process that holds more memory than its models are charged.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "remote/remote_device.hpp"
#include "support/fake_runtime.hpp"
#include "support/runtime_fixture.hpp"
#include "support/test_files.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

using namespace std::chrono_literals;
using warm::test::eventually;
using warm::test::fake_runtime;
using warm::test::temp_dir;

namespace {

// [16 → 8]: 544 bytes.
constexpr std::uint64_t model_bytes = 544;

void write_model(const temp_dir& dir, const std::string& name, std::uint64_t seed = 1) {
  warm::dense_model_options o;
  o.widths = {16, 8};
  o.seed = seed;
  REQUIRE(warm::write_dense_model(dir / ("repo/" + name + "/1/model.safetensors"), o));
}

// What the link logs, kept for the test to read.
struct log_lines {
  std::mutex mutex;
  std::vector<std::string> lines;
  bool has(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

// The link to `fake`, polling its status every 50 ms, charging every byte beyond the models.
warm::runtime_link_options linked(const fake_runtime& fake, log_lines* log = nullptr) {
  warm::runtime_link_options o;
  o.name = "r1";
  o.socket = fake.socket();
  o.restart_min = 50ms;
  o.restart_max = 200ms;
  o.status_period = 50ms;
  o.call_timeout = 2s;
  o.rss_slack = 0;
  if (log)
    o.log = [log](const std::string& line) {
      std::lock_guard<std::mutex> lock(log->mutex);
      log->lines.push_back(line);
    };
  return o;
}

// A runtime over <dir>/repo whose one device is `remote`.
std::unique_ptr<warm::runtime> make_runtime(const temp_dir& dir,
                                            std::shared_ptr<warm::remote_device> remote) {
  warm::runtime_options o;
  o.devices = {};  // the runtime is the only device
  o.attached_devices.push_back({std::move(remote), ""});
  o.repositories = {dir / "repo"};
  o.state_dir = dir / "state";
  o.failure_expiry = 10min;
  o.max_load_attempts = 1;
  o.inference_threads = 2;
  auto rt = warm::runtime::create(std::move(o));
  REQUIRE(rt);
  return std::move(*rt);
}

warm::infer_request request(const std::string& model, std::uint64_t rows = 1) {
  return {model, {warm::test::input(rows, 16)}};
}

std::size_t residents_on(warm::runtime& rt, const std::string& device) {
  auto i = rt.inspect().get();
  REQUIRE(i);
  for (auto& d : i->devices)
    if (d.name == device) return d.resident.size();
  FAIL("no device " << device);
  return 0;
}

}  // namespace

TEST_CASE(
    "outputs that break the load's declaration fail the request with internal; nothing else "
    "breaks") {
  temp_dir dir;
  write_model(dir, "m");
  fake_runtime fake(dir / "r.sock");
  auto remote = warm::remote_device::start(linked(fake));
  REQUIRE(remote->ready());
  auto rt = make_runtime(dir, remote);
  REQUIRE(rt->register_model("m", {"m"}).get());
  REQUIRE(rt->infer(request("m", 2)).get());

  fake.infer_answer = fake_runtime::answer::extra_row;
  auto rows = rt->infer(request("m", 2)).get();
  REQUIRE_FALSE(rows);
  INFO(rows.error().message);
  CHECK(rows.error().code == warm::errc::internal);
  CHECK_THAT(rows.error().message,
             Catch::Contains("runtime r1 answered model m/1/model.safetensors#") &&
                 Catch::Contains(" with output 'output' of 3 rows for a batch of 2"));

  fake.infer_answer = fake_runtime::answer::overflowing;
  auto huge = rt->infer(request("m")).get();
  REQUIRE_FALSE(huge);
  INFO(huge.error().message);
  CHECK(huge.error().code == warm::errc::internal);
  CHECK_THAT(huge.error().message,
             Catch::Contains("runtime r1 answered model m/1/model.safetensors#") &&
                 Catch::Contains("a malformed output: tensor 'output': shape "
                                 "[2305843009213693952] of F64 is too large"));

  // A wrong answer is the runtime's: the model stays loaded and the connection up.
  fake.infer_answer = fake_runtime::answer::correct;
  CHECK(rt->infer(request("m")).get());
  CHECK(remote->restarts() == 0);
  CHECK(fake.loads == 1);
}

TEST_CASE("a status listing 100,000 models loaded: none is unloaded, and the runtime serves on") {
  temp_dir dir;
  fake_runtime fake(dir / "r.sock");
  fake.orphans = 100'000;
  log_lines log;
  auto options = linked(fake, &log);
  options.status_period = 100ms;
  auto remote = warm::remote_device::start(options);
  REQUIRE(remote->ready());
  auto seen = fake.statuses.load();
  REQUIRE(eventually([&] { return fake.statuses >= seen + 3; }));
  CHECK(fake.unloads == 0);
  CHECK(log.has("r1: the runtime lists 100000 models loaded, more than 65536: none is unloaded"));
  CHECK(remote->restarts() == 0);
}

TEST_CASE("the models a new connection finds loaded are unloaded 16 at a time") {
  temp_dir dir;
  fake_runtime fake(dir / "r.sock");
  fake.orphans = 200;
  fake.unload_delay_ms = 2;  // answers come late: warmd must wait for them, not pile on more
  auto remote = warm::remote_device::start(linked(fake));
  REQUIRE(remote->ready());  // after the unloads were answered
  CHECK(fake.unloads == 200);
  CHECK(fake.most_unloads_at_once <= warm::runtime_limits::unloads_at_once);
  CHECK(fake.most_unloads_at_once > 1);
}

TEST_CASE(
    "numbers no runtime could mean are bounded: capacity, loading threads, measured size and "
    "memory") {
  temp_dir dir;
  write_model(dir, "m");
  fake_runtime fake(dir / "r.sock");
  fake.capacity = UINT64_MAX;
  fake.loading_threads = UINT32_MAX;
  fake.extra_rss = UINT64_MAX;
  auto remote = warm::remote_device::start(linked(fake));
  REQUIRE(remote->ready());
  CHECK(remote->capacity() == warm::runtime_limits::bytes);
  // The memory beyond the models is clamped as well: charged, not wrapped around.
  CHECK(remote->used() > warm::runtime_limits::bytes / 2);
  CHECK(remote->used() <= warm::runtime_limits::bytes);
  fake.extra_rss = 0;
  REQUIRE(eventually([&] { return remote->used() == 0; }, 5s));

  fake.measured = UINT64_MAX;
  auto rt = make_runtime(dir, remote);
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto refused = rt->infer(request("m")).get();
  REQUIRE_FALSE(refused);
  INFO(refused.error().message);
  CHECK_THAT(refused.error().message,
             Catch::Contains("the runtime measured") && Catch::Contains("for m/1/model"));
  CHECK(eventually([&] { return fake.held == 0; }, 5s));  // and it was told to drop it
  // Until its next status the runtime's process still reports the refused model's memory, which
  // warm charges (clamped) beyond its models; the charge goes with the model.
  CHECK(eventually([&] { return remote->used() == 0; }, 5s));
}

TEST_CASE(
    "memory the runtime's process holds beyond its models is charged: warm evicts down, and stops "
    "charging") {
  temp_dir dir;
  for (int i = 0; i < 4; ++i)
    write_model(dir, "m" + std::to_string(i), i + 1);
  fake_runtime fake(dir / "r.sock");  // 64 KiB
  log_lines log;
  auto remote = warm::remote_device::start(linked(fake, &log));
  REQUIRE(remote->ready());
  auto rt = make_runtime(dir, remote);
  for (int i = 0; i < 4; ++i) {
    auto id = "m" + std::to_string(i);
    REQUIRE(rt->register_model(id, {id}).get());
    REQUIRE(rt->infer(request(id)).get());
  }
  REQUIRE(remote->used() == 4 * model_bytes);
  CHECK_THAT(remote->state(), Catch::Contains(", rss 8") && !Catch::Contains("charged beyond"));

  // The models' forward() allocates: the process holds room for two models less than the rest.
  const std::uint64_t beyond = remote->capacity() - 2 * model_bytes - 100;
  fake.extra_rss = beyond;
  REQUIRE(eventually([&] { return fake.held == 2; }, 5s));
  CHECK(eventually([&] { return remote->used() == 2 * model_bytes + beyond; }, 5s));
  CHECK(residents_on(*rt, "r1") == 2);
  CHECK_THAT(remote->state(), Catch::Contains(" KiB charged beyond its models)"));
  CHECK(log.has("r1: the runtime's process holds"));

  // The memory goes, and so does its charge: every model fits again.
  fake.extra_rss = 0;
  REQUIRE(eventually([&] { return remote->used() == 2 * model_bytes; }, 5s));
  for (int i = 0; i < 4; ++i)
    CHECK(rt->infer(request("m" + std::to_string(i))).get());
  CHECK(remote->used() == 4 * model_bytes);
  CHECK(residents_on(*rt, "r1") == 4);
  CHECK(log.has("within its models' charges again"));
}
