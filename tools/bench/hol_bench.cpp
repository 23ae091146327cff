// warm-bench hol: head-of-line blocking on warmd's RPC thread.
//
// One process holds warmd's RPC service (tools/warmd/service.*) over a runtime with two loaded
// models, `small` and `large`, on a unix socket in a scratch directory. A client thread (its own
// kj event loop and connection) calls infer on `small` at batch 1 in a closed loop, every call
// timed: alone for half the time, and for the other half while a second client on its own
// connection calls infer on `large` at `large_batch` back to back (its first call answered before
// the timed part starts); the halves are cut into four rounds of each, in rotated order. With the
// runtime's inline_inference_limit below the large inference's cost, the large inferences run on
// the runtime's inference threads and the RPC thread stays free for the small calls; with it above
// (--inline-limit 18446744073709551615), each large inference holds the RPC thread and the small
// calls wait behind it. Reported: small p50/p99 alone and loaded, ratio = p99 loaded / p99 alone,
// the large calls' rate and median latency, the limit. A failed call or a small answer that is not
// a cache hit makes the run fail.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <nlohmann/json.hpp>

#include "../warmd/service.hpp"
#include "benches.hpp"
#include "warm.capnp.h"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// One client: a connection to unix:`path`, calling infer on `target` with `input` in a closed
// loop. The first call is untimed (it connects); then calls are timed until `stop` is set or
// `deadline` passes. `started` is set once the first call was answered.
struct client_run {
  std::vector<double> latencies_us;
  std::string failure;
  std::uint64_t calls = 0;
  double seconds = 0;  // from the first timed call to the end
};

void client_loop(const std::string& path, const std::string& target, const tensor& input,
                 bool want_hit, const std::atomic<bool>& stop, clock_type::time_point deadline,
                 std::atomic<bool>& started, client_run& out) {
  try {
    auto io = kj::setupAsyncIo();
    auto& ws = io.waitScope;
    auto stream =
        io.provider->getNetwork().parseAddress("unix:" + path).wait(ws)->connect().wait(ws);
    capnp::TwoPartyClient client(*stream);
    auto warm = client.bootstrap().castAs<rpc::Warm>();
    auto call = [&] {
      auto req = warm.inferRequest();
      auto r = req.initRequest();
      r.setTarget(target);
      auto t = r.initInputs(1)[0];
      t.setName("input");
      t.setDtype("F32");
      auto shape = t.initShape(static_cast<unsigned>(input.shape.size()));
      for (unsigned i = 0; i < input.shape.size(); ++i)
        shape.set(i, input.shape[i]);
      t.setData(
          kj::arrayPtr(reinterpret_cast<const kj::byte*>(input.data.data()), input.data.size()));
      auto res = req.send().wait(ws);
      if (res.getStatus().getCode() != rpc::Status::Code::OK) {
        out.failure = target + ": " + res.getStatus().getMessage().cStr();
        return false;
      }
      if (want_hit && !res.getResult().getCacheHit()) {
        out.failure = target + ": a resident model missed";
        return false;
      }
      return true;
    };
    bool ok = call();
    started.store(true);
    if (!ok) return;
    auto begin = clock_type::now();
    while (!stop.load(std::memory_order_relaxed)) {
      auto before = clock_type::now();
      if (before >= deadline) break;
      if (!call()) break;
      out.latencies_us.push_back(
          std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
      ++out.calls;
    }
    out.seconds = std::chrono::duration<double>(clock_type::now() - begin).count();
  } catch (const kj::Exception& e) {
    out.failure = e.getDescription().cStr();
    started.store(true);
  }
}

// Weights and biases of a dense model with these widths: its multiply-adds per row.
std::uint64_t parameters_of(const std::vector<std::uint64_t>& widths) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i)
    n += widths[i] * widths[i + 1] + widths[i + 1];
  return n;
}

// A batch of `batch` rows of `input`'s single row.
tensor repeat_rows(const tensor& row, std::uint64_t batch) {
  tensor t{"input", dtype::f32, {batch, row.shape.back()}, {}};
  for (std::uint64_t i = 0; i < batch; ++i)
    t.data.insert(t.data.end(), row.data.begin(), row.data.end());
  return t;
}

// The small client alone for `seconds`.
client_run small_phase(const std::string& path, const tensor& input, double seconds) {
  client_run run;
  std::atomic<bool> stop{false}, started{false};
  auto deadline = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                          std::chrono::duration<double>(seconds));
  client_loop(path, "small", input, true, stop, deadline, started, run);
  return run;
}

}  // namespace

int run_hol(const hol_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench hol: %s\n", message.c_str());
    return 1;
  };
  if (options.small_layers.size() < 2 || options.large_layers.size() < 2)
    return fail("--small and --large need at least two widths");

  scratch_dir dir("hol");
  auto repo = dir.path() / "repo";
  for (auto& [id, layers] :
       {std::pair{"small", options.small_layers}, std::pair{"large", options.large_layers}})
    if (auto r = write_dense_model((repo / id / "1" / model_file_name).string(),
                                   {layers, activation::relu, 1});
        !r)
      return fail(r.error().to_string());
  runtime_options rt_options;
  auto bytes = dense_data_bytes(options.small_layers) + dense_data_bytes(options.large_layers);
  rt_options.devices = {"host:" +
                        std::to_string(std::max<std::uint64_t>(std::uint64_t{1} << 30, 2 * bytes))};
  rt_options.repositories = {repo.string()};
  rt_options.state_dir = (dir.path() / "state").string();
  rt_options.inline_inference_limit = options.inline_limit;
  auto created = runtime::create(rt_options);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;
  for (const char* id : {"small", "large"}) {
    if (auto r = rt->register_model(id, {id}).get(); !r) return fail(r.error().to_string());
    if (auto r = rt->ensure_loaded(id, true).get(); !r) return fail(r.error().to_string());
  }

  const auto path = (dir.path() / "warm.sock").string();
  warmd::service_options service_options;
  service_options.listen = {"unix:" + path};
  service_options.drain_seconds = 30;
  auto service = warmd::service::start(*rt, service_options);
  if (!service) return fail("warm server: " + service.error().to_string());

  const tensor small_input = random_input(options.small_layers.front());
  const tensor large_input =
      repeat_rows(random_input(options.large_layers.front()), options.large_batch);
  // Four rounds, each timing the small client alone and loaded for an eighth of the time, in
  // rotated order (benches.hpp): neither side always runs first.
  constexpr int rounds = 4;
  const double slice = options.seconds / (2.0 * rounds);
  client_run alone, loaded, large;
  auto append = [](client_run& to, const client_run& from) {
    to.latencies_us.insert(to.latencies_us.end(), from.latencies_us.begin(),
                           from.latencies_us.end());
    to.calls += from.calls;
    to.seconds += from.seconds;
    if (to.failure.empty()) to.failure = from.failure;
  };
  for (int round = 0; round < rounds; ++round)
    for (bool with_large : rotated_order(std::vector<bool>{false, true}, round)) {
      if (!with_large) {
        append(alone, small_phase(path, small_input, slice));
        continue;
      }
      client_run large_run;
      std::atomic<bool> stop_large{false}, large_started{false};
      std::thread large_thread([&] {
        client_loop(path, "large", large_input, false, stop_large, clock_type::time_point::max(),
                    large_started, large_run);
      });
      while (!large_started.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      append(loaded, small_phase(path, small_input, slice));
      stop_large.store(true);
      large_thread.join();
      append(large, large_run);
    }
  for (const auto* run : {&alone, &loaded, &large})
    if (!run->failure.empty()) return fail(run->failure);

  std::uint64_t large_cost = options.large_batch * parameters_of(options.large_layers);
  double p99_alone = percentile(alone.latencies_us, 99),
         p99_loaded = percentile(loaded.latencies_us, 99);
  nlohmann::ordered_json out{
      {"scenario", "hol"},
      {"small_p99_us_alone", p99_alone},
      {"small_p99_us_loaded", p99_loaded},
      {"ratio", p99_alone > 0 ? p99_loaded / p99_alone : 0},
      {"small_p50_us_alone", percentile(alone.latencies_us, 50)},
      {"small_p50_us_loaded", percentile(loaded.latencies_us, 50)},
      {"small_calls_alone", alone.calls},
      {"small_calls_loaded", loaded.calls},
      {"large_rps", large.seconds > 0 ? static_cast<double>(large.calls) / large.seconds : 0},
      {"large_p50_ms", percentile(large.latencies_us, 50) / 1e3},
      {"large_calls", large.calls},
      {"small_layers", options.small_layers},
      {"large_layers", options.large_layers},
      {"large_batch", options.large_batch},
      {"large_multiply_adds", large_cost},
      {"inline_limit", options.inline_limit},
      {"offloaded", large_cost > options.inline_limit},
      {"seconds", options.seconds}};
  std::printf("%s\n", out.dump().c_str());
  (*service)->stop();
  service->reset();
  rt.reset();
  return 0;
}

}  // namespace warm::bench
