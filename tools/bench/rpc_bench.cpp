// warm-bench rpc: inference over Cap'n Proto against the transport alone.
//
// One process holds both servers, each on its own kj event-loop thread and unix socket in a
// scratch directory:
//   warm  warmd's RPC service (tools/warmd/service.*: warm::rpc::warm_server over a
//         warm::runtime) with one small dense model registered and loaded;
//   echo  a bare Cap'n Proto server (tools/bench/echo.capnp) taking the same InferRequest and
//         answering an InferResult of the same size (the output tensor warm would return), with
//         no model behind it — the floor the transport sets.
// Then `rounds` times, interleaved (warm, echo, echo, warm, ...: each side runs first in every
// other round, so neither always gets the quieter machine), a phase of
// seconds / (2 x rounds) per server: `clients` client threads, each with its own kj event loop and
// capnp::TwoPartyClient connected over the unix socket (connected and warmed up by one call before
// the phase's clock starts), call infer at batch 1 in a closed loop (one call outstanding per
// client). Every call is timed. Reported: the median over rounds of each server's requests/s,
// ratio = the median over rounds of warm_rps / echo_rps (each pair saw the same machine state),
// and p50/p99 of warm's latencies (echo's as echo_p50_us/echo_p99_us). A call that fails, or a
// warm answer that is not a cache hit, makes the run fail. WARM_BENCH_VERBOSE=1 prints every
// phase's requests/s to stderr.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/thread.h>
#include <nlohmann/json.hpp>

#include "../warmd/service.hpp"
#include "benches.hpp"
#include "echo.capnp.h"
#include "remote/remote_device.hpp"
#include "rpc_calls.hpp"
#include "warm.capnp.h"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// The echo server: an InferResult of the model's output shape, bytes copied from the input.
class echo_server final : public echo_rpc::Echo::Server {
 public:
  explicit echo_server(std::uint64_t out_width) : out_width_(out_width) {}

 protected:
  kj::Promise<void> echo(EchoContext context) override {
    auto request = context.getParams().getRequest();
    auto results = context.getResults();
    results.getStatus().setCode(warm::rpc::Status::Code::OK);
    auto result = results.initResult();
    auto out = result.initOutputs(1)[0];
    out.setName("output");
    out.setDtype("F32");
    auto shape = out.initShape(2);
    shape.set(0, 1);
    shape.set(1, out_width_);
    auto data = out.initData(static_cast<unsigned>(out_width_ * sizeof(float)));
    auto inputs = request.getInputs();
    if (inputs.size() > 0) {
      auto in = inputs[0].getData();
      std::memcpy(data.begin(), in.begin(), std::min<std::size_t>(in.size(), data.size()));
    }
    result.setModel(request.getTarget());
    result.setCacheHit(true);
    return kj::READY_NOW;
  }

 private:
  std::uint64_t out_width_;
};

// The echo server's kj thread: listens on unix:`path` until destroyed.
class echo_thread {
 public:
  // Empty on success, else why it could not listen.
  std::string start(const std::string& path, std::uint64_t out_width) {
    std::promise<std::string> started;
    auto ready = started.get_future();
    thread_ = kj::heap<kj::Thread>([this, path, out_width, &started] {
      bool reported = false;
      try {
        auto io = kj::setupAsyncIo();
        auto addr = io.provider->getNetwork().parseAddress("unix:" + path).wait(io.waitScope);
        auto receiver = addr->listen();
        capnp::TwoPartyServer server(kj::heap<echo_server>(out_width));
        auto accepting = server.listen(*receiver).eagerlyEvaluate([](kj::Exception&& e) {
          std::fprintf(stderr, "warm-bench rpc: echo listener: %s\n", e.getDescription().cStr());
        });
        auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
        stop_ = kj::mv(paf.fulfiller);
        started.set_value("");
        reported = true;
        paf.promise.wait(io.waitScope);
      } catch (const kj::Exception& e) {
        if (!reported) started.set_value(e.getDescription().cStr());
      }
    });
    auto error = ready.get();
    if (!error.empty()) thread_ = nullptr;
    return error;
  }
  ~echo_thread() {
    if (stop_) stop_->fulfill();
    thread_ = nullptr;  // joins
  }

 private:
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
  kj::Own<kj::Thread> thread_;
};

// Fills an infer request exactly as a client of warm would (the same for both servers).
void fill_request(rpc::InferRequest::Builder out, const std::string& target, const tensor& input) {
  out.setTarget(target);
  auto t = out.initInputs(1)[0];
  t.setName(input.name);
  t.setDtype("F32");
  auto shape = t.initShape(static_cast<unsigned>(input.shape.size()));
  for (unsigned i = 0; i < input.shape.size(); ++i)
    shape.set(i, input.shape[i]);
  t.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(input.data.data()), input.data.size()));
}

// `clients` threads, each connected to unix:`path`, calling infer (warm) or echo in a closed loop
// for `seconds`, started together once every one is connected and has made one call.
phase_result run_phase(bool warm_server, const std::string& path, int clients, double seconds,
                       const std::string& target, const tensor& input) {
  std::vector<phase_tally> tallies(
      static_cast<std::size_t>(clients));  // a thread stops at its failure
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  clock_type::time_point start, deadline;
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&, c] {
      auto& mine = tallies[static_cast<std::size_t>(c)];
      mine.latencies_us.reserve(1 << 16);
      bool counted = false;
      try {
        auto io = kj::setupAsyncIo();
        auto& ws = io.waitScope;
        auto addr = io.provider->getNetwork().parseAddress("unix:" + path).wait(ws);
        auto stream = addr->connect().wait(ws);
        capnp::TwoPartyClient client(*stream);
        std::function<bool()> call;
        rpc::Warm::Client warm = nullptr;
        echo_rpc::Echo::Client echo = nullptr;
        if (warm_server) {
          warm = client.bootstrap().castAs<rpc::Warm>();
          call = [&] {
            auto req = warm.inferRequest();
            fill_request(req.initRequest(), target, input);
            auto res = req.send().wait(ws);
            if (res.getStatus().getCode() != rpc::Status::Code::OK) {
              mine.failure = std::string("warm: ") + res.getStatus().getMessage().cStr();
              return false;
            }
            if (!res.getResult().getCacheHit()) {
              mine.failure = "warm: a resident model missed";
              return false;
            }
            return true;
          };
        } else {
          echo = client.bootstrap().castAs<echo_rpc::Echo>();
          call = [&] {
            auto req = echo.echoRequest();
            fill_request(req.initRequest(), target, input);
            auto res = req.send().wait(ws);
            if (res.getStatus().getCode() != rpc::Status::Code::OK ||
                res.getResult().getOutputs().size() != 1) {
              mine.failure = "echo: a bad answer";
              return false;
            }
            return true;
          };
        }
        bool warmed = call();  // connects the bootstrap and warms both ends
        ready.fetch_add(1);
        counted = true;
        while (!go.load(std::memory_order_acquire))
          std::this_thread::yield();
        if (!warmed) return;
        for (;;) {
          auto before = clock_type::now();
          if (before >= deadline) break;
          if (!call()) break;
          mine.latencies_us.push_back(
              std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
          ++mine.calls;
        }
        mine.end = clock_type::now();
      } catch (const kj::Exception& e) {
        mine.failure = e.getDescription().cStr();
        if (!counted) ready.fetch_add(1);
      }
    });
  }
  while (ready.load() != clients)
    std::this_thread::yield();
  start = clock_type::now();
  deadline = start + std::chrono::duration_cast<clock_type::duration>(
                         std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();

  return merge_tallies(tallies, start, seconds);
}

// The rpc loop against two warmd services in this process serving the same model, one from its
// host device, one from a model runtime (a remote_device over warm-runtime).
int run_rpc_runtime(const rpc_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench rpc --runtime: %s\n", message.c_str());
    return 1;
  };
  scratch_dir dir("rpc-runtime");
  const std::string id = "rpc";
  auto path = (dir.path() / "repo" / id / "1" / model_file_name).string();
  if (auto r = write_dense_model(path, {options.layers, activation::relu, 1}); !r)
    return fail(r.error().to_string());
  auto command = options.runtime_command;
  if (command.empty()) {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    command = (self.parent_path() / "warm-runtime").string() + " --capacity 1GiB";
  }
  // Both as warmd runs them: hits larger than its inline limit (and every model-runtime inference)
  // leave the RPC thread for the inference threads.
  auto make = [&](const std::string& name,
                  std::shared_ptr<remote_device> remote) -> expected<std::unique_ptr<runtime>> {
    runtime_options o;
    if (remote)
      o.attached_devices.push_back({std::move(remote), ""});
    else
      o.devices = {"host:1GiB"};
    o.repositories = {(dir.path() / "repo").string()};
    o.state_dir = (dir.path() / ("state-" + name)).string();
    o.inline_inference_limit = 1'052'672;  // warmd's default --inline-inference-limit
    auto created = runtime::create(o);
    if (!created) return created;
    if (auto r = (*created)->register_model(id, {id}).get(); !r) return std::move(r).error();
    if (auto r = (*created)->ensure_loaded(id, true).get(); !r) return std::move(r).error();
    return created;
  };
  runtime_link_options link;
  link.name = "runtime";
  link.command = command;
  auto remote = remote_device::start(link);
  if (!remote->ready()) return fail("the runtime did not start: " + remote->state());
  auto host_rt = make("host", nullptr);
  if (!host_rt) return fail("host: " + host_rt.error().to_string());
  auto remote_rt = make("runtime", remote);
  if (!remote_rt) return fail("runtime: " + remote_rt.error().to_string());

  std::vector<std::string> paths;
  std::vector<std::unique_ptr<warmd::service>> services;
  for (auto* rt : {host_rt->get(), remote_rt->get()}) {
    paths.push_back((dir.path() / ("s" + std::to_string(paths.size()) + ".sock")).string());
    warmd::service_options so;
    so.listen = {"unix:" + paths.back()};
    so.drain_seconds = 5;
    auto service = warmd::service::start(*rt, so);
    if (!service) return fail("server: " + service.error().to_string());
    services.push_back(std::move(*service));
  }
  const tensor input = random_input(options.layers.front());
  const double phase_seconds = options.seconds / (2.0 * options.rounds);
  std::vector<double> host_rps, runtime_rps, ratios, host_latencies, runtime_latencies;
  for (int round = 0; round < options.rounds; ++round) {
    double round_host = 0, round_runtime = 0;
    for (bool on_runtime : rotated_order<bool>({true, false}, round)) {
      auto result =
          run_phase(true, paths[on_runtime ? 1 : 0], options.clients, phase_seconds, id, input);
      if (!result.failure.empty()) return fail(result.failure);
      auto& latencies = on_runtime ? runtime_latencies : host_latencies;
      latencies.insert(latencies.end(), result.latencies_us.begin(), result.latencies_us.end());
      (on_runtime ? runtime_rps : host_rps).push_back(result.rps);
      (on_runtime ? round_runtime : round_host) = result.rps;
    }
    ratios.push_back(round_runtime / round_host);
  }
  nlohmann::ordered_json out{{"scenario", "rpc-runtime"},
                             {"clients", options.clients},
                             {"layers", options.layers},
                             {"runtime_rps", median(runtime_rps)},
                             {"host_rps", median(host_rps)},
                             {"ratio", median(ratios)},
                             {"p50_us", percentile(runtime_latencies, 50)},
                             {"p99_us", percentile(runtime_latencies, 99)},
                             {"host_p50_us", percentile(host_latencies, 50)},
                             {"host_p99_us", percentile(host_latencies, 99)},
                             {"rounds", options.rounds}};
  std::printf("%s\n", out.dump().c_str());
  for (auto& s : services)
    s->stop();
  services.clear();
  remote_rt->reset();
  host_rt->reset();
  return 0;
}

}  // namespace

void fill_infer_request(rpc::InferRequest::Builder out, const std::string& target,
                        const tensor& input) {
  fill_request(out, target, input);
}

phase_result run_rpc_phase(const std::string& path, int clients, double seconds,
                           const std::string& target, const tensor& input) {
  return run_phase(true, path, clients, seconds, target, input);
}

int run_rpc(const rpc_options& options) {
  if (options.runtime) return run_rpc_runtime(options);
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench rpc: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.clients < 1 || options.rounds < 1)
    return fail("--clients and --rounds must be at least 1");

  scratch_dir dir("rpc");
  const std::string id = "rpc";
  auto created = loaded_single_model_runtime(dir, id, options.layers);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;

  const auto warm_path = (dir.path() / "warm.sock").string();
  const auto echo_path = (dir.path() / "echo.sock").string();
  warmd::service_options service_options;
  service_options.listen = {"unix:" + warm_path};
  service_options.drain_seconds = 5;
  auto service = warmd::service::start(*rt, service_options);
  if (!service) return fail("warm server: " + service.error().to_string());
  {
    echo_thread echo;
    if (auto error = echo.start(echo_path, options.layers.back()); !error.empty())
      return fail("echo server: " + error);

    const tensor input = random_input(options.layers.front());
    const double phase_seconds = options.seconds / (2.0 * options.rounds);
    std::vector<double> warm_rps, echo_rps, ratios, warm_latencies, echo_latencies;
    for (int round = 0; round < options.rounds; ++round) {
      double round_warm = 0, round_base = 0;
      for (bool warm_phase : rotated_order<bool>({true, false}, round)) {
        auto result = run_phase(warm_phase, warm_phase ? warm_path : echo_path, options.clients,
                                phase_seconds, id, input);
        if (!result.failure.empty()) return fail(result.failure);
        if (std::getenv("WARM_BENCH_VERBOSE"))
          std::fprintf(stderr, "round %d %s %.0f rps\n", round, warm_phase ? "warm" : "echo",
                       result.rps);
        auto& latencies = warm_phase ? warm_latencies : echo_latencies;
        latencies.insert(latencies.end(), result.latencies_us.begin(), result.latencies_us.end());
        (warm_phase ? warm_rps : echo_rps).push_back(result.rps);
        (warm_phase ? round_warm : round_base) = result.rps;
      }
      ratios.push_back(round_warm / round_base);
    }

    nlohmann::ordered_json out{{"scenario", "rpc"},
                               {"clients", options.clients},
                               {"layers", options.layers},
                               {"warm_rps", median(warm_rps)},
                               {"echo_rps", median(echo_rps)},
                               {"ratio", median(ratios)},
                               {"p50_us", percentile(warm_latencies, 50)},
                               {"p99_us", percentile(warm_latencies, 99)},
                               {"echo_p50_us", percentile(echo_latencies, 50)},
                               {"echo_p99_us", percentile(echo_latencies, 99)},
                               {"rounds", options.rounds}};
    std::printf("%s\n", out.dump().c_str());
  }
  (*service)->stop();
  service->reset();
  rt.reset();
  return 0;
}

}  // namespace warm::bench
