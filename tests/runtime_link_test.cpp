// Model runtimes as devices: the real build/warm-runtime (path in $WARM_RUNTIME, set by meson)
// started and supervised by a remote_device, driven through warm::runtime as warmd drives it.
// Kills with SIGKILL mid-load and mid-inference, a runtime that hangs on a load, one that reports
// less capacity than its models take, a runtime that outlives its client, and the spec parser.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include <capnp/ez-rpc.h>

#include "remote/remote_device.hpp"
#include "rpc/convert.hpp"
#include "support/runtime_fixture.hpp"
#include "support/test_files.hpp"
#include "support/warmd_process.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

using namespace std::chrono_literals;
using warm::test::eventually;
using warm::test::temp_dir;

namespace {

// [16 → 8]: 544 bytes.
constexpr std::uint64_t model_bytes = 544;

std::string runtime_exe() {
  const char* exe = std::getenv("WARM_RUNTIME");
  REQUIRE(exe != nullptr);
  return exe;
}

void write_model(const temp_dir& dir, const std::string& name, std::uint64_t seed = 1) {
  warm::dense_model_options o;
  o.widths = {16, 8};
  o.seed = seed;
  REQUIRE(warm::write_dense_model(dir / ("repo/" + name + "/1/model.safetensors"), o));
}

// The repository of `dir` as the runtime is told it (canonical, as warm sends its roots).
std::string repo_of(const temp_dir& dir) {
  return std::filesystem::canonical(dir / "repo").string();
}

// A runtime warm starts and supervises, which may load from `dir`'s repository (when given).
warm::runtime_link_options supervised(const std::string& name,
                                      const std::string& args = "--capacity 64KiB",
                                      const temp_dir* dir = nullptr) {
  warm::runtime_link_options o;
  o.name = name;
  o.command = runtime_exe() + " " + args;
  if (dir) o.repositories = {repo_of(*dir)};
  o.restart_min = 50ms;
  o.restart_max = 200ms;
  o.status_period = 100ms;
  o.call_timeout = 2s;
  return o;
}

// A runtime over <dir>/repo with `devices` (specs) and the attached runtimes, on the real clock
// and file loader.
std::unique_ptr<warm::runtime> make_runtime(
    const temp_dir& dir, std::vector<std::string> devices,
    std::vector<std::shared_ptr<warm::remote_device>> runtimes, std::uint32_t attempts = 3,
    std::function<void(warm::runtime_options&)> adjust = nullptr) {
  warm::runtime_options o;
  o.devices = std::move(devices);
  for (auto& r : runtimes)
    o.attached_devices.push_back({r, ""});
  o.repositories = {dir / "repo"};
  o.state_dir = dir / "state";
  o.failure_expiry = 10min;
  o.max_load_attempts = attempts;
  o.inference_threads = 2;
  if (adjust) adjust(o);
  auto rt = warm::runtime::create(std::move(o));
  REQUIRE(rt);
  return std::move(*rt);
}

warm::infer_request request(const std::string& model, float value = 0.5f) {
  return {model, {warm::test::input(1, 16, value)}};
}

bool alive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

const warm::device_info& device_named(const warm::inspection& i, const std::string& name) {
  for (auto& d : i.devices)
    if (d.name == name) return d;
  FAIL("no device " << name);
  throw;
}

}  // namespace

TEST_CASE("a supervised runtime is a device with the runtime's capacity and kinds") {
  auto dev = warm::remote_device::start(supervised("r1", "--capacity 3MiB"));
  REQUIRE(dev->ready());
  CHECK(dev->capacity() == 3 * 1024 * 1024);
  CHECK(dev->serves("dense"));
  CHECK_FALSE(dev->serves("onnx"));
  CHECK(alive(dev->pid()));
  CHECK(dev->state().find("warm-runtime") != std::string::npos);
  // It measures its process's memory, sandboxed as it is (/proc is hidden from it).
  CHECK(dev->state().find(", rss ") != std::string::npos);
}

TEST_CASE("a model in a runtime answers exactly as the same model on warm's host device") {
  temp_dir dir;
  write_model(dir, "m", 7);
  auto remote = warm::remote_device::start(supervised("r1", "--capacity 64KiB", &dir));
  auto rt = make_runtime(dir, {}, {remote});
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto out = rt->infer(request("m")).get();
  REQUIRE(out);
  auto status = rt->status("m").get();
  REQUIRE(status);
  CHECK(status->device == "r1");
  CHECK(status->bytes == model_bytes);
  CHECK(remote->used() == model_bytes);

  temp_dir other;
  write_model(other, "m", 7);
  auto local = make_runtime(other, {"host:64KiB"}, {});
  REQUIRE(local->register_model("m", {"m"}).get());
  auto expected = local->infer(request("m")).get();
  REQUIRE(expected);
  REQUIRE(out->outputs.size() == 1);
  CHECK(out->outputs[0].shape == expected->outputs[0].shape);
  CHECK(out->outputs[0].data == expected->outputs[0].data);

  // Wrong inputs are refused by warm before the runtime sees them.
  auto wrong = rt->infer({"m", {warm::test::input(1, 15)}}).get();
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == warm::errc::invalid_argument);

  // An operator's unload frees the bytes in the runtime too.
  REQUIRE(rt->unload("m").get());
  CHECK(eventually([&] { return remote->used() == 0; }));
}

TEST_CASE("an inference in a runtime holds none of warm's inference threads while it waits") {
  temp_dir dir;
  for (const char* m : {"h", "x", "r"})
    write_model(dir, m);
  auto options = supervised("r1", "--capacity 1KiB", &dir);
  options.status_period = 30s;  // no status while it is stopped: it is not taken for hung
  auto remote = warm::remote_device::start(options);
  // One inference thread, and every hit leaves the caller's thread for it.
  auto rt = make_runtime(dir, {"host:2KiB"}, {remote}, 3, [](warm::runtime_options& o) {
    o.inference_threads = 1;
    o.inline_inference_limit = 0;
  });
  // Placement by free room: h and x on the host (2 KiB), then r in the runtime.
  for (const char* m : {"h", "x", "r"}) {
    REQUIRE(rt->register_model(m, {m}).get());
    REQUIRE(rt->infer(request(m)).get());
  }
  REQUIRE(rt->status("h").get()->device == "host");
  REQUIRE(rt->status("r").get()->device == "r1");

  ::kill(remote->pid(), SIGSTOP);  // the runtime holds on to what it is sent
  auto waiting = rt->infer(request("r"));
  std::this_thread::sleep_for(50ms);
  auto other = rt->infer(request("h"));  // needs the one inference thread
  CHECK(other.wait_for(5s) == std::future_status::ready);
  CHECK(waiting.wait_for(0s) == std::future_status::timeout);
  ::kill(remote->pid(), SIGCONT);
  CHECK(waiting.get());
  CHECK(other.get());
}

TEST_CASE(
    "a runtime killed mid-inference: the request fails clearly, the runtime restarts, the model it "
    "ran is failed") {
  temp_dir dir;
  write_model(dir, "m");
  write_model(dir, "n", 2);
  auto remote = warm::remote_device::start(supervised("r1", "--capacity 64KiB", &dir));
  auto rt = make_runtime(dir, {}, {remote});
  REQUIRE(rt->register_model("m", {"m"}).get());
  REQUIRE(rt->register_model("n", {"n"}).get());
  REQUIRE(rt->infer(request("m")).get());
  REQUIRE(rt->infer(request("n")).get());
  auto first = remote->pid();

  ::kill(first, SIGSTOP);  // the inference below is in the runtime's hands when it dies
  auto pending = rt->infer(request("m"));
  std::this_thread::sleep_for(50ms);
  ::kill(first, SIGKILL);  // as a model whose code brings the runtime down
  auto failed = pending.get();
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == warm::errc::unavailable);
  INFO(failed.error().message);

  // The link reaped it, reported both models lost, and started a new process.
  REQUIRE(
      eventually([&] { return remote->ready() && remote->pid() != first && remote->pid() > 0; }));
  CHECK(remote->restarts() == 1);
  auto lost = rt->inspect().get();
  REQUIRE(lost);
  CHECK(device_named(*lost, "r1").resident.empty());
  CHECK(rt->metrics()
            .devices.back()
            .evictions[static_cast<int>(warm::eviction_reason::lost)]
            .value() == 2);

  // n was only resident: its failure record lasts until the runtime is back, then it loads again.
  REQUIRE(eventually([&] { return static_cast<bool>(rt->infer(request("n")).get()); }, 5s));
  auto status = rt->status("n").get();
  REQUIRE(status);
  CHECK(status->device == "r1");
  CHECK(status->state == warm::model_state::loaded);

  // m was the one running: it is not loaded into the new process to crash it again, but fails
  // fast, saying why, until its failure expires (10 minutes here) or an operator retries.
  auto again = rt->infer(request("m")).get();
  REQUIRE_FALSE(again);
  CHECK(again.error().code == warm::errc::load_failed);
  CHECK_THAT(again.error().message,
             Catch::Contains("signal 9") && Catch::Contains("running when it died"));
  CHECK(remote->pid() != first);
  CHECK(remote->restarts() == 1);
  REQUIRE(rt->retry("m").get());
  CHECK(rt->infer(request("m")).get());
}

TEST_CASE("a runtime loads only from the repositories it was given") {
  temp_dir dir;
  write_model(dir, "m");
  auto remote = warm::remote_device::start(supervised("r1"));  // no repository
  auto rt = make_runtime(dir, {}, {remote}, 1);
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto refused = rt->infer(request("m")).get();
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("not in a repository this runtime serves"));
  CHECK(remote->restarts() == 0);  // a refusal, not a crash
}

TEST_CASE(
    "a runtime killed mid-load: the load is retried on a healthy device and the request succeeds") {
  temp_dir dir;
  write_model(dir, "m");
  // The runtime has the most free room, so placement picks it first.
  auto remote = warm::remote_device::start(supervised("r1", "--capacity 1MiB", &dir));
  auto rt = make_runtime(dir, {"host:64KiB"}, {remote});
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto first = remote->pid();
  ::kill(first, SIGSTOP);
  auto pending = rt->infer(request("m"));
  REQUIRE(eventually([&] {
    auto i = rt->inspect().get();
    return i && !i->running.empty() && i->running[0].device == "r1";
  }));
  std::this_thread::sleep_for(50ms);
  ::kill(first, SIGKILL);
  auto served = pending.get();
  REQUIRE(served);
  auto status = rt->status("m").get();
  REQUIRE(status);
  CHECK(status->device == "host");
  // One attempt failed (on r1); the load that succeeded cleared its record.
  CHECK(rt->metrics().load_failures.value() == 1);
  auto i = rt->inspect().get();
  REQUIRE(i);
  CHECK(i->failures.empty());
}

TEST_CASE(
    "a runtime that hangs on a load: the load times out with a failure record, and the runtime "
    "drops it") {
  temp_dir dir;
  write_model(dir, "m");
  auto options = supervised("r1", "--capacity " + std::to_string(model_bytes), &dir);
  options.load_timeout = 300ms;
  options.status_period = 10s;  // no status while it is stopped: the load timeout alone acts
  auto remote = warm::remote_device::start(options);
  auto rt = make_runtime(dir, {}, {remote}, 1);
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto pid = remote->pid();
  ::kill(pid, SIGSTOP);
  auto started = std::chrono::steady_clock::now();
  auto failed = rt->ensure_loaded("m", true).get();
  auto waited = std::chrono::steady_clock::now() - started;
  ::kill(pid, SIGCONT);
  REQUIRE_FALSE(failed);
  INFO(failed.error().message);
  CHECK(failed.error().message.find("took longer than 300 ms") != std::string::npos);
  CHECK(waited < 5s);
  auto i = rt->inspect().get();
  REQUIRE(i);
  REQUIRE(i->failures.size() == 1);
  CHECK(i->failures[0].device == "r1");
  // The runtime got the load late and was told to drop it: nothing stays charged anywhere.
  CHECK(remote->used() == 0);
  CHECK(remote->pid() == pid);  // a slow load is not a dead runtime
  // Operators clear the record; the model then loads. The runtime has room for one model: the
  // late load it was told to drop must not keep it.
  CHECK(eventually(
      [&] {
        REQUIRE(rt->retry("m").get());
        return static_cast<bool>(rt->infer(request("m")).get());
      },
      5s));
}

TEST_CASE("a runtime that reports less capacity than its models take: warm evicts down to it") {
  temp_dir dir;
  for (int i = 0; i < 4; ++i)
    write_model(dir, "m" + std::to_string(i), i + 1);
  auto capacity_file = dir / "capacity";
  warm::test::write_file(capacity_file, "64KiB\n");
  auto remote = warm::remote_device::start(
      supervised("r1", "--capacity 64KiB --capacity-file " + capacity_file, &dir));
  auto rt = make_runtime(dir, {}, {remote});
  for (int i = 0; i < 4; ++i) {
    auto id = "m" + std::to_string(i);
    REQUIRE(rt->register_model(id, {id}).get());
    REQUIRE(rt->infer(request(id)).get());
  }
  REQUIRE(remote->used() == 4 * model_bytes);

  warm::test::write_file(capacity_file, std::to_string(2 * model_bytes) + "\n");
  REQUIRE(eventually([&] { return remote->capacity() == 2 * model_bytes; }, 5s));
  REQUIRE(eventually([&] { return remote->used() <= 2 * model_bytes; }, 5s));
  auto i = rt->inspect().get();
  REQUIRE(i);
  CHECK(device_named(*i, "r1").resident.size() == 2);
  CHECK(device_named(*i, "r1").untracked == 0);
  // The evicted ones load again within the new capacity, evicting others.
  CHECK(rt->infer(request("m0")).get());
  CHECK(remote->used() <= 2 * model_bytes);

  // A larger capacity is adopted as well, and used.
  warm::test::write_file(capacity_file, "64KiB\n");
  REQUIRE(eventually([&] { return remote->capacity() == 64 * 1024; }, 5s));
  for (int i = 0; i < 4; ++i)
    CHECK(rt->infer(request("m" + std::to_string(i))).get());
  CHECK(remote->used() == 4 * model_bytes);
}

TEST_CASE("a runtime on a socket outlives its client: the next client unloads what it left") {
  temp_dir dir;
  write_model(dir, "m");
  auto socket = dir / "r.sock";
  pid_t server = ::fork();
  REQUIRE(server >= 0);
  if (server == 0) {
    std::string exe = runtime_exe();
    // Room for one model only: a model left behind would leave none for the next client's.
    ::execl(exe.c_str(), exe.c_str(), "--capacity", std::to_string(model_bytes).c_str(), "--listen",
            ("unix:" + socket).c_str(), "--repo", repo_of(dir).c_str(), nullptr);
    ::_exit(127);
  }
  struct reap {
    pid_t pid;
    ~reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{server};
  warm::runtime_link_options o;
  o.name = "r1";
  o.socket = socket;
  o.restart_min = 50ms;
  o.status_period = 100ms;
  REQUIRE(eventually(
      [&] { return std::ifstream(socket).good() || ::access(socket.c_str(), F_OK) == 0; }));

  {
    auto remote = warm::remote_device::start(o);
    REQUIRE(remote->ready());
    CHECK(remote->pid() == 0);
    auto root = std::filesystem::canonical(dir / "repo").string();
    warm::model_location where{root + "/m/1/model.safetensors", root, 1, "dense"};
    auto reservation = remote->reserve(model_bytes);
    REQUIRE(reservation);
    auto model = remote->load_model(where, std::move(*reservation), nullptr);
    REQUIRE(model);
    // Never unloaded, as by a warmd killed with SIGKILL: kept, never destroyed (its device is
    // gone), where LeakSanitizer sees it reachable.
    static auto* abandoned = new std::vector<std::unique_ptr<warm::resident_model>>();
    abandoned->push_back(std::move(*model));
  }
  // A new client (warmd restarted) connects: the orphan is unloaded, so its own load fits.
  auto remote = warm::remote_device::start(o);
  REQUIRE(remote->ready());
  auto rt = make_runtime(dir, {}, {remote});
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto served = rt->infer(request("m")).get();
  INFO((served ? std::string() : served.error().message));
  CHECK(served);
  CHECK(alive(server));
}

TEST_CASE("runtime specs") {
  auto command = warm::parse_runtime_spec("torch=build/warm-runtime --capacity 4GiB");
  REQUIRE(command);
  CHECK(command->name == "torch");
  CHECK(command->command == "build/warm-runtime --capacity 4GiB");
  CHECK(command->socket.empty());
  auto socket = warm::parse_runtime_spec("r.1=unix:/run/warm/r.sock");
  REQUIRE(socket);
  CHECK(socket->socket == "/run/warm/r.sock");
  CHECK(socket->command.empty());
  // gRPC runtimes run the bridge, the address or command quoted for the shell.
  auto grpc = warm::parse_runtime_spec("py=grpc:unix:/run/py.sock", "/opt/warm/warm-mmesh");
  REQUIRE(grpc);
  CHECK(grpc->name == "py");
  CHECK(grpc->command == "'/opt/warm/warm-mmesh' --connect 'unix:/run/py.sock'");
  auto exec = warm::parse_runtime_spec("py=grpc-exec:run --size 'a b'", "/b/m");
  REQUIRE(exec);
  CHECK(exec->command == R"('/b/m' --exec 'run --size '\''a b'\''')");
  auto no_bridge = warm::parse_runtime_spec("py=grpc:localhost:1");
  REQUIRE_FALSE(no_bridge);
  CHECK(no_bridge.error().message.find("warm-mmesh") != std::string::npos);
  for (auto bad : {"torch", "=cmd", "host=cmd", "cuda:0=cmd", "a b=cmd",
                   "r=", "r=   ", "r=unix:", "r=grpc:", "r=grpc-exec: "}) {
    INFO(bad);
    auto parsed = warm::parse_runtime_spec(bad, "/b/m");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == warm::errc::invalid_argument);
  }
}

TEST_CASE(
    "a runtime command that cannot start: the device is not ready and loads fail fast, clearly") {
  temp_dir dir;
  write_model(dir, "m");
  auto options = supervised("r1");
  options.command = "/nonexistent/warm-runtime";
  options.start_timeout = 300ms;
  auto remote = warm::remote_device::start(options);
  CHECK_FALSE(remote->ready());
  auto rt = make_runtime(dir, {}, {remote});
  REQUIRE(rt->register_model("m", {"m"}).get());
  auto failed = rt->infer(request("m")).get();
  REQUIRE_FALSE(failed);
  INFO(failed.error().message);
  CHECK(failed.error().message.find("r1 is not ready") != std::string::npos);
  CHECK(remote->state().find("exited with status 127") != std::string::npos);
}

// ---- through warmd ------------------------------------------------------------------------------

namespace {

// The pid in a runtime device's state line ("runtime pid 4242, ..."), 0 if none.
pid_t runtime_pid(const std::string& state) {
  auto at = state.find("runtime pid ");
  return at == std::string::npos ? 0 : static_cast<pid_t>(std::stol(state.substr(at + 12)));
}

struct warmd_client {
  explicit warmd_client(const std::string& address)
      : ez(address), warm(ez.getMain<warm::rpc::Warm>()) {}
  kj::WaitScope& ws() { return ez.getWaitScope(); }
  warm::rpc::Status::Code infer(const std::string& id) {
    auto req = warm.inferRequest();
    warm::rpc::to_capnp(warm::infer_request{id, {warm::test::input(1, 16)}}, req.initRequest());
    return req.send().wait(ws()).getStatus().getCode();
  }
  warm::inspection inspect() {
    auto res = warm.inspectRequest().send().wait(ws());
    return warm::rpc::from_capnp(res.getInspection());
  }
  capnp::EzRpcClient ez;
  warm::rpc::Warm::Client warm;
};

}  // namespace

TEST_CASE("warmd supervises its runtimes: they die with it and start again with it") {
  warm::test::warmd_process warmd;
  warmd.device = "host:1KiB";  // the runtime has more room: models go there
  warmd.log_level = "info";
  warmd.write_model("m", {16, 8});
  std::vector<std::string> args{"--runtime", "r1=" + runtime_exe() + " --capacity 64KiB"};
  warmd.start(args);
  CHECK(eventually(
      [&] {
        return warmd.log().find("warmd ready: 2 device(s) (1 of them model runtimes)") !=
               std::string::npos;
      },
      5s));
  pid_t first = 0;
  {
    warmd_client c(warmd.address());
    auto reg = c.warm.registerModelRequest();
    reg.setId("m");
    reg.getInfo().setPath("m");
    REQUIRE(reg.send().wait(c.ws()).getStatus().getCode() == warm::rpc::Status::Code::OK);
    REQUIRE(c.infer("m") == warm::rpc::Status::Code::OK);
    auto snapshot = c.inspect();
    REQUIRE(snapshot.devices.size() == 2);
    CHECK(snapshot.devices[1].name == "r1");
    CHECK(snapshot.devices[1].resident.size() == 1);
    first = runtime_pid(snapshot.devices[1].state);
    REQUIRE(alive(first));
  }
  warmd.crash();  // SIGKILL: no chance to stop its runtimes
  CHECK(eventually([&] { return !alive(first); }, 5s));

  warmd.start(args);
  warmd_client c(warmd.address());
  REQUIRE(c.infer("m") == warm::rpc::Status::Code::OK);
  auto snapshot = c.inspect();
  CHECK(snapshot.devices[1].resident.size() == 1);
  auto second = runtime_pid(snapshot.devices[1].state);
  CHECK(alive(second));
  CHECK(second != first);
  CHECK(warmd.stop() == 0);
  CHECK(eventually([&] { return !alive(second); }, 5s));
}
