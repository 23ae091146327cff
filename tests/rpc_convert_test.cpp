// The RPC conversions (src/rpc/convert.hpp): round trips through capnp messages and the checks on
// a client's tensors.
#include <catch2/catch.hpp>

#include <capnp/message.h>

#include <cstring>
#include <limits>

#include "rpc/convert.hpp"

using namespace warm;
namespace r = warm::rpc;

namespace {

tensor f32_tensor(std::vector<std::uint64_t> shape, std::size_t floats) {
  tensor t;
  t.name = "input";
  t.type = dtype::f32;
  t.shape = std::move(shape);
  t.data.resize(floats * 4);
  for (std::size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = std::byte(i & 0xff);
  return t;
}

}  // namespace

TEST_CASE("status codes map both ways") {
  for (auto c :
       {errc::not_found, errc::invalid_argument, errc::model_too_large, errc::capacity_exhausted,
        errc::load_failed, errc::unavailable, errc::timeout, errc::internal}) {
    CHECK(r::to_errc(r::to_capnp(c)) == c);
    CHECK(r::code_name(r::to_capnp(c)) == to_string(c));
  }
  CHECK_FALSE(r::to_errc(r::Status::Code::OK));
  CHECK(r::code_name(r::Status::Code::OK) == "ok");
  CHECK(r::code_name(r::Status::Code::TOO_LARGE) == "too_large");
  CHECK(r::code_name(r::Status::Code::UNAUTHENTICATED) == "unauthenticated");

  capnp::MallocMessageBuilder msg;
  auto st = msg.initRoot<r::Status>();
  r::to_capnp(make_error(errc::model_too_large, "m is too large"), st);
  auto back = r::from_capnp(st.asReader());
  REQUIRE_FALSE(back);
  CHECK(back.error().code == errc::model_too_large);
  CHECK(back.error().message == "m is too large");
  r::set_ok(st);
  CHECK(r::from_capnp(st.asReader()));
  CHECK_FALSE(r::optional_error(st.asReader()));
}

TEST_CASE("model states, statuses and infos round-trip") {
  for (auto s : {model_state::not_found, model_state::not_loaded, model_state::queued,
                 model_state::loading, model_state::loaded, model_state::loading_failed})
    CHECK(r::from_capnp(r::to_capnp(s)) == s);
  for (auto s : {vmodel_state::not_found, vmodel_state::defined, vmodel_state::transitioning,
                 vmodel_state::transition_failed})
    CHECK(r::from_capnp(r::to_capnp(s)) == s);

  capnp::MallocMessageBuilder msg;
  auto info = msg.initRoot<r::ModelInfo>();
  r::to_capnp(model_info("a/b", 3, 1024), info);
  CHECK(r::from_capnp(info.asReader()) == model_info("a/b", 3, 1024));
  model_info batched("a");
  batched.batching = batching_options{};
  batched.batching->max_batch = 16;
  batched.batching->max_queue_delay = std::chrono::microseconds(250);
  batched.batching->preferred_batch = {4, 16};
  batched.batching->max_queue = 9;
  r::to_capnp(batched, info);
  CHECK(r::from_capnp(info.asReader()) == batched);
  batched.batching = batching_options{};  // batching off for this model: not the same as none
  r::to_capnp(batched, info);
  CHECK(r::from_capnp(info.asReader()) == batched);
  r::to_capnp(model_info("a"), info);
  CHECK(r::from_capnp(info.asReader()) == model_info("a"));

  model_status s;
  s.id = "m";
  s.state = model_state::loading_failed;
  s.device = "host0";
  s.bytes = 77;
  s.requests = 5;
  s.hits = 4;
  s.requests_per_second = 1.5;
  s.in_flight = 2;
  s.idle_seconds = 3.25;
  s.loads = {2, 10.0, 16.0};
  s.last_error = make_error(errc::load_failed, "broken");
  s.retry_in_seconds = 9;
  s.input_width = 784;
  s.output_width = 10;
  s.batching = batched.batching;
  s.version = 3;
  auto ms = msg.initRoot<r::ModelStatus>();
  r::to_capnp(s, ms);
  CHECK(ms.getLoadStddevMs() == 4.0);
  auto b = r::from_capnp(ms.asReader());
  CHECK(b.id == "m");
  CHECK(b.state == model_state::loading_failed);
  CHECK(b.device == "host0");
  CHECK(b.bytes == 77);
  CHECK(b.requests == 5);
  CHECK(b.hits == 4);
  CHECK(b.in_flight == 2);
  CHECK(b.idle_seconds == 3.25);
  CHECK(b.loads.count == 2);
  CHECK(b.loads.variance_ms2 == 16.0);
  REQUIRE(b.last_error);
  CHECK(b.last_error->code == errc::load_failed);
  CHECK(b.retry_in_seconds == 9);
  CHECK(b.input_width == 784);
  CHECK(b.batching == s.batching);
  CHECK(b.version == std::optional<std::uint64_t>(3));
  s.version.reset();  // a file named directly: no version, and none comes back
  r::to_capnp(s, ms);
  CHECK_FALSE(r::from_capnp(ms.asReader()).version);
  CHECK(b.output_width == 10);

  vmodel_status v;
  v.id = "v";
  v.state = vmodel_state::transitioning;
  v.active = "a";
  v.target = "b";
  v.active_state = model_state::loaded;
  v.target_state = model_state::loading;
  auto vs = msg.initRoot<r::VModelStatus>();
  r::to_capnp(v, vs);
  auto vb = r::from_capnp(vs.asReader());
  CHECK(vb.id == "v");
  CHECK(vb.state == vmodel_state::transitioning);
  CHECK(vb.active == "a");
  CHECK(vb.target == "b");
  CHECK(vb.target_state == model_state::loading);
  CHECK_FALSE(vb.error);
}

TEST_CASE("tensors round-trip and malformed ones are refused") {
  capnp::MallocMessageBuilder msg;
  auto t = msg.initRoot<r::Tensor>();
  auto in = f32_tensor({2, 3}, 6);
  r::to_capnp(in, t);
  CHECK(std::string(t.getDtype().cStr()) == "F32");
  auto back = r::from_capnp(t.asReader());
  REQUIRE(back);
  CHECK(back->name == "input");
  CHECK(back->type == dtype::f32);
  CHECK(back->shape == in.shape);
  CHECK(back->data == in.data);

  SECTION("unknown dtype") {
    t.setDtype("F31");
    auto e = r::from_capnp(t.asReader());
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::invalid_argument);
  }
  SECTION("data size does not match the shape") {
    auto shape = t.initShape(2);
    shape.set(0, 2);
    shape.set(1, 4);
    auto e = r::from_capnp(t.asReader());
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::invalid_argument);
  }
  SECTION("a shape whose product overflows") {
    auto shape = t.initShape(3);
    shape.set(0, std::uint64_t(1) << 32);
    shape.set(1, std::uint64_t(1) << 31);
    shape.set(2, 2);  // 2^64 elements wrap to 0 without the check
    t.setData(nullptr);
    auto e = r::from_capnp(t.asReader());
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::invalid_argument);
    shape.set(2, 0);  // zero elements and no data: fine
    CHECK(r::from_capnp(t.asReader()));
  }
  SECTION("a scalar") {
    t.initShape(0);
    t.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>("abcd"), 4));
    auto s = r::from_capnp(t.asReader());
    REQUIRE(s);
    CHECK(s->data.size() == 4);
  }
}

TEST_CASE("inference requests and results round-trip") {
  capnp::MallocMessageBuilder msg;
  auto req = msg.initRoot<r::InferRequest>();
  infer_request in{"v1", {f32_tensor({4}, 4)}};
  r::to_capnp(in, req);
  auto back = r::from_capnp(req.asReader());
  REQUIRE(back);
  CHECK(back->target == "v1");
  REQUIRE(back->inputs.size() == 1);
  CHECK(back->inputs[0].shape == std::vector<std::uint64_t>{4});

  req.getInputs()[0].setDtype("nope");
  auto bad = r::from_capnp(req.asReader());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);
  CHECK(bad.error().message.find("input 0") != std::string::npos);

  auto res = msg.initRoot<r::InferResult>();
  infer_result out{{f32_tensor({1, 2}, 2)}, "m", true, 1.5};
  out.outputs[0].name = "output";
  r::to_capnp(out, res);
  auto rb = r::from_capnp(res.asReader());
  REQUIRE(rb);
  CHECK(rb->model == "m");
  CHECK(rb->cache_hit);
  CHECK(rb->load_wait_ms == 1.5);
  CHECK(rb->outputs[0].name == "output");
}

TEST_CASE("inspections and events round-trip") {
  inspection s;
  s.devices.push_back(
      {"host0", "kdf", 100, 50, 10, 3, 1, {{"m", 40, 1, 7, 0.5}}, "runtime pid 7, restarts 1", 0});
  s.queue.push_back({"q", true, 12.0, 1, 5});
  s.running.push_back({"r", "host0", "loading", 2});
  s.failures.push_back({"f", "host0", make_error(errc::load_failed, "bad"), 1.0, 599.0});
  model_status m;
  m.id = "m";
  m.state = model_state::loaded;
  s.models.push_back(m);
  s.registered_models = 3;
  s.vmodels = 1;
  s.max_concurrent_loads = 2;
  s.loads_started = 4;
  s.loads_failed = 1;
  s.importance_rebuilds = 6;
  s.importance_rebuild_seconds = 0.25;

  capnp::MallocMessageBuilder msg;
  auto ins = msg.initRoot<r::Inspection>();
  r::to_capnp(s, ins);
  auto b = r::from_capnp(ins.asReader());
  REQUIRE(b.devices.size() == 1);
  CHECK(b.devices[0].name == "host0");
  CHECK(b.devices[0].used == 50);
  CHECK(b.devices[0].state == "runtime pid 7, restarts 1");
  REQUIRE(b.devices[0].resident.size() == 1);
  CHECK(b.devices[0].resident[0].uses == 7);
  CHECK(b.queue.at(0).waiting);
  CHECK(b.queue.at(0).waiters == 5);
  CHECK(b.running.at(0).phase == "loading");
  CHECK(b.failures.at(0).error.code == errc::load_failed);
  CHECK(b.failures.at(0).expires_in_seconds == 599.0);
  CHECK(b.models.at(0).state == model_state::loaded);
  CHECK(b.registered_models == 3);
  CHECK(b.importance_rebuild_seconds == 0.25);

  model_event e;
  e.model = "m";
  e.previous = model_state::loading;
  e.state = model_state::loading_failed;
  e.device = "host0";
  e.error = make_error(errc::model_too_large, "too big");
  e.sequence = 42;
  auto ev = msg.initRoot<r::ModelEvent>();
  r::to_capnp(e, ev);
  auto eb = r::from_capnp(ev.asReader());
  CHECK(eb.model == "m");
  CHECK(eb.previous == model_state::loading);
  CHECK(eb.state == model_state::loading_failed);
  REQUIRE(eb.error);
  CHECK(eb.error->code == errc::model_too_large);
  CHECK(eb.sequence == 42);
}

TEST_CASE("the disk tier and a model's place in it round-trip") {
  inspection s;
  s.tier.open = true;
  s.tier.dir = "/var/lib/warm/tier";
  s.tier.capacity = 1000;
  s.tier.used = 600;
  s.tier.reserved = 100;
  s.tier.files = 2;
  s.tier.hits = 5;
  s.tier.misses = 2;
  s.tier.evictions = 1;
  s.tier.fetches = 2;
  s.tier.fetch_failures = 1;
  s.tier.fetch_bytes = 700;
  s.tier.fetch_seconds = 1.5;
  s.tier.held.push_back({"s3://b/m/1/model.safetensors", 400, {"a", "b"}});
  s.tier.held.push_back({"https://h/x/model.pt", 200, {}});
  model_status m;
  m.id = "a";
  m.source = "s3://b/m/1/model.safetensors";
  m.in_tier = true;
  m.tier_bytes = 400;
  s.models.push_back(m);

  capnp::MallocMessageBuilder msg;
  auto ins = msg.initRoot<r::Inspection>();
  r::to_capnp(s, ins);
  auto b = r::from_capnp(ins.asReader());
  CHECK(b.tier.open);
  CHECK(b.tier.dir == s.tier.dir);
  CHECK(b.tier.capacity == 1000);
  CHECK(b.tier.used == 600);
  CHECK(b.tier.reserved == 100);
  CHECK(b.tier.files == 2);
  CHECK(b.tier.hits == 5);
  CHECK(b.tier.misses == 2);
  CHECK(b.tier.evictions == 1);
  CHECK(b.tier.fetches == 2);
  CHECK(b.tier.fetch_failures == 1);
  CHECK(b.tier.fetch_bytes == 700);
  CHECK(b.tier.fetch_seconds == 1.5);
  REQUIRE(b.tier.held.size() == 2);
  CHECK(b.tier.held[0].source == "s3://b/m/1/model.safetensors");
  CHECK(b.tier.held[0].bytes == 400);
  CHECK(b.tier.held[0].models == std::vector<std::string>{"a", "b"});
  CHECK(b.tier.held[1].models.empty());
  REQUIRE(b.models.size() == 1);
  CHECK(b.models[0].source == m.source);
  CHECK(b.models[0].in_tier);
  CHECK(b.models[0].tier_bytes == 400);

  // No tier open and a local model: nothing.
  capnp::MallocMessageBuilder empty_msg;
  auto empty = empty_msg.initRoot<r::Inspection>();
  r::to_capnp(inspection{}, empty);
  auto e = r::from_capnp(empty.asReader());
  CHECK_FALSE(e.tier.open);
  CHECK(e.tier.held.empty());
  capnp::MallocMessageBuilder local_msg;
  auto local = local_msg.initRoot<r::ModelStatus>();
  r::to_capnp(model_status{}, local);
  auto l = r::from_capnp(local.asReader());
  CHECK(l.source.empty());
  CHECK_FALSE(l.in_tier);
  CHECK(l.tier_bytes == 0);
}

TEST_CASE("an instance's tiered models round-trip in the cluster's view") {
  cluster_info c;
  c.enabled = true;
  cluster_instance x;
  x.name = "i1";
  x.residents = {"a"};
  x.tiered = {"b", "c"};
  c.instances.push_back(x);
  capnp::MallocMessageBuilder msg;
  auto info = msg.initRoot<r::ClusterInfo>();
  r::to_capnp(c, info);
  auto back = r::from_capnp(info.asReader());
  REQUIRE(back.instances.size() == 1);
  CHECK(back.instances[0].residents == std::vector<std::string>{"a"});
  CHECK(back.instances[0].tiered == std::vector<std::string>{"b", "c"});
}
