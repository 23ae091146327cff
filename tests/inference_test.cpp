// Inference through warm::runtime: results equal the executor's, inputs are checked against the
// model, and the reply says who served it, whether it hit and how long it waited.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>

#include "support/runtime_fixture.hpp"
#include "warm/model_repository.hpp"

using namespace std::chrono_literals;
using namespace warm;

namespace {

std::vector<float> floats(const tensor& t) {
  std::vector<float> out(t.data.size() / sizeof(float));
  std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

}  // namespace

TEST_CASE("a miss waits for the load and a hit does not; outputs equal the executor's") {
  test::runtime_fixture f({"m"});
  f.register_all();
  f.loader->hold();
  auto pending = f.rt->infer({"m", {test::input(3)}});
  REQUIRE(f.loader->wait_started(1));
  auto loading = f.rt->status("m").get();
  CHECK(loading->state == model_state::loading);
  CHECK(loading->loaded_bytes == 0);  // held at the gate before copying
  f.time->advance(40ms);
  f.loader->open_gate();
  auto miss = pending.get();
  REQUIRE(miss);
  CHECK_FALSE(miss->cache_hit);
  CHECK(miss->load_wait_ms == Approx(40));
  CHECK(miss->model == "m");
  REQUIRE(miss->outputs.size() == 1);
  CHECK(miss->outputs[0].name == "output");
  CHECK(miss->outputs[0].shape == std::vector<std::uint64_t>{3, 8});

  auto hit = f.rt->infer({"m", {test::input(3)}}).get();
  REQUIRE(hit);
  CHECK(hit->cache_hit);
  CHECK(f.rt->status("m").get()->loaded_bytes == test::small_model_bytes);
  CHECK(hit->load_wait_ms == 0);
  CHECK(floats(hit->outputs[0]) == floats(miss->outputs[0]));

  // The same file run directly on a separate device gives the same numbers.
  auto file = open_model_file(f.dir / "repo/m/1/model.safetensors");
  REQUIRE(file);
  auto dev = make_device(*parse_device_spec("host:1MiB"));
  REQUIRE(dev);
  auto resident = (*dev)->load(*file);
  REQUIRE(resident);
  std::vector<float> in(3 * 16, 0.5f), out;
  REQUIRE((*dev)->infer(**resident, in.data(), in.size(), 3, out));
  CHECK(floats(hit->outputs[0]) == out);
}

TEST_CASE("inputs that do not match the model are invalid_argument, not a crash") {
  test::runtime_fixture f({"m"});
  f.register_all();
  auto check = [&](infer_request request) {
    auto r = f.rt->infer(std::move(request)).get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    return r.error().message;
  };
  auto wrong_dtype = test::input();
  wrong_dtype.type = dtype::f16;
  CHECK(check({"m", {wrong_dtype}}).find("F32") != std::string::npos);
  auto wrong_width = test::input(1, 15);
  CHECK(check({"m", {wrong_width}}).find("the model takes input F32 [-1, 16]") !=
        std::string::npos);
  auto wrong_rank = test::input();
  wrong_rank.shape = {1, 1, 16};
  check({"m", {wrong_rank}});
  auto short_data = test::input(2);
  short_data.data.resize(short_data.data.size() - 4);
  CHECK(check({"m", {short_data}}).find("bytes") != std::string::npos);
  auto zero_batch = test::input();
  zero_batch.shape = {0, 16};
  zero_batch.data.clear();
  check({"m", {zero_batch}});
  auto wrong_name = test::input();
  wrong_name.name = "pixels";
  check({"m", {wrong_name}});
  check({"m", {test::input(), test::input()}});
  check({"m", {}});

  auto rank1 = test::input();
  rank1.shape = {16};
  auto r = f.rt->infer({"m", {rank1}}).get();
  REQUIRE(r);
  CHECK(r->outputs[0].shape == std::vector<std::uint64_t>{1, 8});

  auto unknown = f.rt->infer({"nope", {test::input()}}).get();
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == errc::not_found);
}

// docs/reliability.md promises errors "naming what the model takes": each one, message and all.
TEST_CASE("each input error names what the model takes") {
  test::runtime_fixture f({"m"});  // dense 16 -> 8
  f.register_all();
  auto message_of = [&](infer_request request) {
    auto r = f.rt->infer(std::move(request)).get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    return r.error().message;
  };
  auto f16 = test::input();
  f16.type = dtype::f16;
  CHECK(message_of({"m", {f16}}) == "input 'input' must be F32 (FP32), not F16 (FP16)");
  auto rank3 = test::input();
  rank3.shape = {1, 1, 16};
  CHECK(message_of({"m", {rank3}}) ==
        "input 'input' must have rank 2 (input F32 [-1, 16]); got rank 3");
  CHECK(message_of({"m", {test::input(1, 15)}}) ==
        "input 'input' has shape [1, 15]; the model takes input F32 [-1, 16]");
  auto short_data = test::input(2);
  short_data.data.resize(short_data.data.size() - 4);
  CHECK(message_of({"m", {short_data}}) ==
        "input 'input' holds 124 bytes; shape [2, 16] of F32 needs 128");
  auto zero_batch = test::input();
  zero_batch.shape = {0, 16};
  zero_batch.data.clear();
  CHECK(message_of({"m", {zero_batch}}) == "batch must be at least 1");
  // The largest batch is bounded by the widest layer's activations (2^27 elements / 16 = 8388608
  // rows); one row more is refused from the shape, before the (absent) data is looked at.
  auto huge = test::input();
  huge.shape = {8'388'609, 16};
  huge.data.clear();
  CHECK(message_of({"m", {huge}}) ==
        "batch of 8388609 is too large for this model; it takes at most 8388608 rows");
  auto at_most = test::input();
  at_most.shape = {8'388'608, 16};
  at_most.data.clear();
  CHECK_THAT(message_of({"m", {at_most}}),
             Catch::StartsWith("input 'input' holds 0 bytes; shape [8388608, 16]"));
  auto renamed = test::input();
  renamed.name = "pixels";
  CHECK(message_of({"m", {renamed}}) ==
        "unknown input tensor 'pixels'; the model's input is 'input'");
  CHECK(message_of({"m", {test::input(), test::input()}}) ==
        "the model takes 1 input tensor ('input'); got 2: 'input' twice");
  CHECK(message_of({"m", {test::input(), renamed}}) ==
        "the model takes 1 input tensor ('input'); got 2: 'pixels' is not one of them");
  CHECK(message_of({"m", {}}) == "the model takes 1 input tensor ('input'); got 0");
}

TEST_CASE("inspection shows devices, residents, models and counters") {
  test::runtime_fixture f({"a", "b"});
  f.register_all();
  REQUIRE(f.rt->infer({"a", {test::input()}}).get());
  // Its only use so far was the miss that loaded it: a use, and idle since.
  auto first = f.rt->inspect().get();
  REQUIRE(first);
  REQUIRE(first->devices.at(0).resident.size() == 1);
  CHECK(first->devices[0].resident[0].uses == 1);
  CHECK(first->devices[0].resident[0].idle_seconds >= 0);
  REQUIRE(f.rt->infer({"a", {test::input()}}).get());
  auto snapshot = f.rt->inspect().get();
  REQUIRE(snapshot);
  CHECK(snapshot->registered_models == 2);
  REQUIRE(snapshot->devices.size() == 1);
  auto& dev = snapshot->devices[0];
  CHECK(dev.name == "host");
  CHECK(dev.policy == "lru");
  CHECK(dev.capacity == 64 * 1024);
  CHECK(dev.used == test::small_model_bytes);
  REQUIRE(dev.resident.size() == 1);
  CHECK(dev.resident[0].model == "a");
  CHECK(dev.resident[0].uses == 2);       // the miss that waited for the load, and the hit
  REQUIRE(snapshot->models.size() == 1);  // only models used so far have actors
  CHECK(snapshot->models[0].id == "a");
  CHECK(snapshot->models[0].requests == 2);
  CHECK(snapshot->models[0].hits == 1);
  CHECK(snapshot->models[0].loads.count == 1);
  CHECK(snapshot->loads_started == 1);
  CHECK(snapshot->queue.empty());
  CHECK(snapshot->running.empty());
}

TEST_CASE("each device may run its own policy; unknown policies are refused at creation") {
  test::runtime_fixture f({"a"}, {"host.0:64KiB", "host.1:64KiB"}, 2, [](runtime_options& o) {
    o.policy = "gdsf";
    o.device_policies = {"", "iam"};
  });
  auto snapshot = f.rt->inspect().get();
  REQUIRE(snapshot->devices.size() == 2);
  CHECK(snapshot->devices[0].policy == "gdsf");
  CHECK(snapshot->devices[1].policy == "iam");

  runtime_options bad;
  bad.repositories = {f.dir / "repo"};
  bad.state_dir = f.dir / "state2";
  bad.policy = "fifo";
  auto refused = runtime::create(bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK(refused.error().message.find("kdf") != std::string::npos);  // lists the known names
  CHECK(runtime_options{}.policy == "kdf");
}

TEST_CASE("watchers see every state change of a load, in order") {
  test::runtime_fixture f({"a", "bad"});
  f.register_all();
  std::mutex mutex;
  std::vector<std::string> seen;
  auto id = f.rt->watch([&](const model_event& e) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(e.model + ":" + std::string(to_string(e.state)));
  });
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  f.loader->fail("bad");
  CHECK_FALSE(f.rt->ensure_loaded("bad", true).get());
  auto snapshot = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return seen;
  };
  REQUIRE(test::eventually([&] { return snapshot().size() == 6; }));
  CHECK(snapshot() == std::vector<std::string>{"a:QUEUED", "a:LOADING", "a:LOADED", "bad:QUEUED",
                                               "bad:LOADING", "bad:LOADING_FAILED"});
  f.rt->unwatch(id);
  REQUIRE(f.rt->unregister_model("a").get());
  REQUIRE(test::eventually([&] { return test::state_of(*f.rt, "a") == model_state::not_found; }));
  CHECK(snapshot().size() == 6);  // unwatched: the unregistration was not delivered
}
