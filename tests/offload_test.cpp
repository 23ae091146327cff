// Head-of-line blocking: a hit above runtime_options::inline_inference_limit runs on the runtime's
// inference threads, so warmd's RPC thread keeps serving other connections meanwhile. Driven
// through warm::runtime and through warmd's RPC service (tools/warmd/service.*) in this process,
// over a unix socket. The heavy inference is kept in flight deterministically by a stalled
// device (fault_injector::hold_inferences), not by timing.
#include <catch2/catch.hpp>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "../tools/warmd/service.hpp"
#include "support/test_files.hpp"
#include "warm.capnp.h"
#include "warm/fault_injection.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace {

using namespace warm;

constexpr std::uint64_t in_width = 16, out_width = 8;
constexpr std::uint64_t parameters = in_width * out_width + out_width;  // 136
constexpr std::uint64_t heavy_batch = 64;                               // 8704 multiply-adds
constexpr std::uint64_t limit = 1000;
static_assert(parameters <= limit && heavy_batch * parameters > limit,
              "batch 1 runs inline, heavy_batch does not");

// A runtime with model "m" [16 → 8] loaded on a faulty host device (so inferences can be held).
struct loaded_runtime {
  explicit loaded_runtime(std::uint64_t inline_limit) {
    REQUIRE(write_dense_model(dir / "repo/m/1/" + model_file_name,
                              {{in_width, out_width}, activation::relu, 1}));
    runtime_options options;
    options.devices = {"host:16MiB"};
    options.repositories = {dir / "repo"};
    options.state_dir = dir / "state";
    options.make_device = faulty_device_factory(faults);
    options.inline_inference_limit = inline_limit;
    auto created = runtime::create(std::move(options));
    REQUIRE(created);
    rt = std::move(*created);
    REQUIRE(rt->register_model("m", {"m"}).get());
    REQUIRE(rt->ensure_loaded("m", true).get());
  }
  ~loaded_runtime() { faults->release_inferences(); }  // never leave an inference stalled

  test::temp_dir dir;
  std::shared_ptr<fault_injector> faults = std::make_shared<fault_injector>();
  std::unique_ptr<runtime> rt;
};

tensor zeros(std::uint64_t batch) {
  tensor t{"input", dtype::f32, {batch, in_width}, {}};
  t.data.resize(batch * in_width * sizeof(float));
  return t;
}

// An infer call for `batch` rows of zeros on model "m".
kj::Promise<capnp::Response<rpc::Warm::InferResults>> send_infer(rpc::Warm::Client& warm,
                                                                 std::uint64_t batch) {
  auto req = warm.inferRequest();
  auto r = req.initRequest();
  r.setTarget("m");
  auto t = r.initInputs(1)[0];
  t.setName("input");
  t.setDtype("F32");
  auto shape = t.initShape(2);
  shape.set(0, batch);
  shape.set(1, in_width);
  t.initData(static_cast<unsigned>(batch * in_width * sizeof(float)));
  return req.send();
}

// One client connection on the test thread's event loop.
struct connection {
  connection(kj::AsyncIoContext& io, const std::string& path) {
    auto address = io.provider->getNetwork().parseAddress("unix:" + path).wait(io.waitScope);
    stream = address->connect().wait(io.waitScope);
    client = kj::heap<capnp::TwoPartyClient>(*stream);
    warm = client->bootstrap().castAs<rpc::Warm>();
  }
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> client;
  rpc::Warm::Client warm = nullptr;
};

bool ok_hit(capnp::Response<rpc::Warm::InferResults>& r, std::uint64_t batch) {
  if (r.getStatus().getCode() != rpc::Status::Code::OK || !r.getResult().getCacheHit())
    return false;
  auto outputs = r.getResult().getOutputs();
  return outputs.size() == 1 && outputs[0].getShape().size() == 2 &&
         outputs[0].getShape()[0] == batch && outputs[0].getShape()[1] == out_width;
}

}  // namespace

TEST_CASE(
    "runtime: hits run inline up to inline_inference_limit, heavier ones on the inference "
    "threads") {
  loaded_runtime w(limit);
  auto caller = std::this_thread::get_id();
  auto run = [&](tensor input) {
    std::promise<std::pair<std::thread::id, expected<infer_result>>> answered;
    auto future = answered.get_future();
    w.rt->infer({"m", {std::move(input)}}, [&answered](expected<infer_result> r) {
      answered.set_value({std::this_thread::get_id(), std::move(r)});
    });
    return future.get();
  };
  auto light = run(zeros(1));
  CHECK(light.first == caller);
  REQUIRE(light.second);
  CHECK(light.second->cache_hit);

  // Held in the device, the heavy hit is running elsewhere: infer() has already returned. (Run
  // inline, infer() itself would be stalled until the release.)
  w.faults->hold_inferences(heavy_batch);
  std::promise<expected<infer_result>> heavy_answer;
  auto heavy = heavy_answer.get_future();
  auto called = std::async(std::launch::async, [&] {
    w.rt->infer({"m", {zeros(heavy_batch)}},
                [&](expected<infer_result> r) { heavy_answer.set_value(std::move(r)); });
  });
  struct release_on_exit {  // before `called` is joined, whatever fails
    fault_injector& faults;
    ~release_on_exit() { faults.release_inferences(); }
  } release{*w.faults};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.faults->held_inferences() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(w.faults->held_inferences() == 1);
  CHECK(called.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(heavy.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  CHECK(w.rt->status("m").get()->in_flight == 1);  // its lease is held while it runs
  w.faults->release_inferences();
  called.get();
  auto result = heavy.get();
  REQUIRE(result);
  CHECK(result->cache_hit);
  CHECK(result->load_wait_ms == 0);
  CHECK(result->outputs.at(0).shape == std::vector<std::uint64_t>{heavy_batch, out_width});
  CHECK(w.rt->metrics().requests_hit.value() == 2);
  CHECK(w.rt->metrics().requests_miss.value() == 0);

  // A heavy batch the runtime refuses costs nothing: it is answered at once, on the caller's
  // thread.
  tensor wrong = zeros(heavy_batch);
  wrong.shape = {heavy_batch / 2, in_width};
  auto refused = run(std::move(wrong));
  CHECK(refused.first == caller);
  REQUIRE_FALSE(refused.second);
  CHECK(refused.second.error().code == errc::invalid_argument);
}

TEST_CASE("rpc: a heavy hit on one connection does not hold up calls on another") {
  loaded_runtime w(limit);
  warmd::service_options options;
  options.listen = {"unix:" + (w.dir / "warm.sock")};
  options.drain_seconds = 2;
  auto service = warmd::service::start(*w.rt, options);
  REQUIRE(service);

  auto io = kj::setupAsyncIo();
  auto& ws = io.waitScope;
  auto& timer = io.provider->getTimer();
  connection heavy_client(io, w.dir / "warm.sock"), light_client(io, w.dir / "warm.sock");
  {
    auto first = send_infer(heavy_client.warm, 1).wait(ws);  // both connections up, the model hot
    REQUIRE(ok_hit(first, 1));
    auto second = send_infer(light_client.warm, 1).wait(ws);
    REQUIRE(ok_hit(second, 1));
  }

  w.faults->hold_inferences(heavy_batch);
  auto heavy = send_infer(heavy_client.warm, heavy_batch);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.faults->held_inferences() == 0 && std::chrono::steady_clock::now() < deadline)
    timer.afterDelay(1 * kj::MILLISECONDS).wait(ws);  // runs this loop: the call goes out
  REQUIRE(w.faults->held_inferences() == 1);

  // The heavy inference is stalled inside the device. A light inference and a control call on
  // the other connection are answered meanwhile (with the inference inline on the RPC thread,
  // the thread itself would be stalled and these would wait for the release).
  bool light_ok = false, status_ok = false;
  auto light = send_infer(light_client.warm, 1)
                   .then([&](capnp::Response<rpc::Warm::InferResults>&& r) {
                     light_ok = ok_hit(r, 1);
                     auto status = light_client.warm.getModelStatusRequest();
                     status.setId("m");
                     return status.send();
                   })
                   .then([&](capnp::Response<rpc::Warm::GetModelStatusResults>&& r) {
                     status_ok = r.getStatus().getCode() == rpc::Status::Code::OK;
                   });
  light.exclusiveJoin(timer.afterDelay(10 * kj::SECONDS)).wait(ws);
  CHECK(light_ok);
  CHECK(status_ok);
  CHECK(w.faults->held_inferences() == 1);  // and the heavy one was in flight all along

  w.faults->release_inferences();
  auto answer = heavy.wait(ws);
  CHECK(ok_hit(answer, heavy_batch));
  CHECK(w.rt->metrics().requests_hit.value() == 4);
  CHECK(w.rt->metrics().requests_miss.value() == 0);
  (*service)->stop();
}
