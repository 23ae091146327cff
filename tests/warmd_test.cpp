// Black-box tests of the daemon: start the real build/warmd (path in $WARMD, set by meson) on a
// temporary socket, state directory and repository, and drive every method of schemas/warm.capnp
// over Cap'n Proto, as a client would.
#include <catch2/catch.hpp>

#include <capnp/ez-rpc.h>
#include <fcntl.h>
#include <kj/async-io.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "rpc/convert.hpp"
#include "support/warmd_process.hpp"
#include "warm/model_writer.hpp"

namespace fs = std::filesystem;
namespace r = warm::rpc;
using Code = warm::rpc::Status::Code;

namespace {

using warm::test::warmd_process;

// A connected client: the Warm capability and the event loop to wait on.
struct client {
  explicit client(const std::string& address) : ez(address), warm(ez.getMain<r::Warm>()) {}
  kj::WaitScope& ws() { return ez.getWaitScope(); }

  Code register_model(const std::string& id, const std::string& path, bool load = false,
                      bool sync = false) {
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath(path);
    req.setLoadNow(load);
    req.setSync(sync);
    return req.send().wait(ws()).getStatus().getCode();
  }
  Code ensure(const std::string& id, bool sync = true) {
    auto req = warm.ensureLoadedRequest();
    req.setId(id);
    req.setSync(sync);
    return req.send().wait(ws()).getStatus().getCode();
  }
  warm::model_status status(const std::string& id) {
    auto req = warm.getModelStatusRequest();
    req.setId(id);
    auto res = req.send().wait(ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    return r::from_capnp(res.getModel());
  }

  capnp::EzRpcClient ez;
  r::Warm::Client warm;
};

// An F32 input [1, width] with the given value in every element.
warm::tensor input(std::uint64_t width, float value = 0.5f) {
  warm::tensor t;
  t.name = "input";
  t.shape = {1, width};
  t.data.resize(width * 4);
  for (std::uint64_t i = 0; i < width; ++i)
    std::memcpy(t.data.data() + 4 * i, &value, 4);
  return t;
}

// Records the events a watch delivers.
class recorder final : public r::StateListener::Server {
 public:
  explicit recorder(std::vector<warm::model_event>& events) : events_(events) {}

 protected:
  kj::Promise<void> modelStateChanged(ModelStateChangedContext context) override {
    events_.push_back(r::from_capnp(context.getParams().getEvent()));
    return kj::READY_NOW;
  }

 private:
  std::vector<warm::model_event>& events_;
};

}  // namespace

TEST_CASE("warmd serves every method over the unix socket") {
  warmd_process d;
  d.write_model("small", {8, 16, 4});
  d.write_model("other", {8, 4});
  d.write_model("huge", warm::widths_for_bytes(6 << 20, 1024, 16));  // > the 4 MiB device
  d.start();
  client c(d.address());

  // Registration: new, idempotent, different info, escaping paths.
  CHECK(c.register_model("small", "small") == Code::OK);
  CHECK(c.register_model("small", "small") == Code::OK);
  CHECK(c.register_model("small", "other") == Code::INVALID_ARGUMENT);
  CHECK(c.register_model("escape", "../small") == Code::INVALID_ARGUMENT);
  CHECK(c.register_model("abs", "/etc") == Code::INVALID_ARGUMENT);
  CHECK(c.register_model("other", "other") == Code::OK);
  CHECK(c.register_model("huge", "huge") == Code::OK);

  // Status: registered, unknown (ok with NOT_FOUND).
  CHECK(c.status("small").state == warm::model_state::not_loaded);
  CHECK(c.status("nope").state == warm::model_state::not_found);

  // ensureLoaded: sync load, unknown id, a model larger than every device.
  CHECK(c.ensure("small") == Code::OK);
  CHECK(c.status("small").state == warm::model_state::loaded);
  CHECK(c.ensure("nope") == Code::NOT_FOUND);
  CHECK(c.ensure("huge") == Code::MODEL_TOO_LARGE);

  // Inference: ok, then the client's mistakes as statuses.
  auto infer = [&](const std::string& target, const warm::tensor& t) {
    auto req = c.warm.inferRequest();
    r::to_capnp(warm::infer_request{target, {t}}, req.initRequest());
    return req.send().wait(c.ws());
  };
  {
    auto res = infer("small", input(8));
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto out = r::from_capnp(res.getResult());
    REQUIRE(out);
    CHECK(out->model == "small");
    CHECK(out->cache_hit);
    REQUIRE(out->outputs.size() == 1);
    CHECK(out->outputs[0].shape == std::vector<std::uint64_t>{1, 4});
    CHECK(out->outputs[0].data.size() == 16);
  }
  CHECK(infer("small", input(7)).getStatus().getCode() == Code::INVALID_ARGUMENT);  // wrong shape
  {
    auto t = input(8);
    t.type = warm::dtype::i32;  // same byte count, wrong dtype
    CHECK(infer("small", t).getStatus().getCode() == Code::INVALID_ARGUMENT);
  }
  {
    auto req = c.warm.inferRequest();
    r::to_capnp(warm::infer_request{"small", {input(8)}}, req.initRequest());
    req.getRequest().getInputs()[0].setDtype("F99");  // unknown dtype
    CHECK(req.send().wait(c.ws()).getStatus().getCode() == Code::INVALID_ARGUMENT);
    auto req2 = c.warm.inferRequest();  // a sent request is consumed: build another
    r::to_capnp(warm::infer_request{"small", {input(8)}}, req2.initRequest());
    auto shape = req2.getRequest().getInputs()[0].initShape(2);  // bytes do not match the shape
    shape.set(0, 2);
    shape.set(1, 8);
    CHECK(req2.send().wait(c.ws()).getStatus().getCode() == Code::INVALID_ARGUMENT);
  }
  CHECK(infer("nope", input(8)).getStatus().getCode() == Code::NOT_FOUND);

  // vmodels: set, status, infer through it, delete.
  {
    auto req = c.warm.setVModelRequest();
    req.setId("v");
    req.setTarget("small");
    auto res = req.send().wait(c.ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    CHECK(std::string(res.getVmodel().getTarget().cStr()) == "small");
  }
  {
    auto req = c.warm.getVModelStatusRequest();
    req.setId("v");
    auto res = req.send().wait(c.ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto v = r::from_capnp(res.getVmodel());
    CHECK(v.active == "small");
    CHECK(v.state == warm::vmodel_state::defined);
  }
  {
    auto res = infer("v", input(8));
    REQUIRE(res.getStatus().getCode() == Code::OK);
    CHECK(std::string(res.getResult().getModel().cStr()) == "small");
  }
  {
    auto req = c.warm.setVModelRequest();  // compare-and-set on a stale target
    req.setId("v");
    req.setTarget("other");
    req.setExpectedTarget("huge");
    CHECK(req.send().wait(c.ws()).getStatus().getCode() != Code::OK);
  }
  {
    auto req = c.warm.deleteVModelRequest();
    req.setId("v");
    CHECK(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
    auto st = c.warm.getVModelStatusRequest();
    st.setId("v");
    CHECK(st.send().wait(c.ws()).getStatus().getCode() == Code::NOT_FOUND);
  }

  // listModels: two pages of two, then the end.
  {
    std::vector<std::string> seen;
    std::string after;
    int pages = 0;
    do {
      auto req = c.warm.listModelsRequest();
      req.setAfter(after);
      req.setLimit(2);
      auto res = req.send().wait(c.ws());
      REQUIRE(res.getStatus().getCode() == Code::OK);
      for (auto m : res.getModels())
        seen.push_back(m.getId().cStr());
      after = res.getNext().cStr();
      ++pages;
    } while (!after.empty() && pages < 10);
    CHECK(seen == std::vector<std::string>{"huge", "other", "small"});
    CHECK(pages == 2);
  }

  // inspect: the device and the counts.
  {
    auto res = c.warm.inspectRequest().send().wait(c.ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto snapshot = r::from_capnp(res.getInspection());
    REQUIRE(snapshot.devices.size() == 1);
    CHECK(snapshot.devices[0].capacity == (4u << 20));
    CHECK(snapshot.registered_models == 3);
    bool resident = false;
    for (auto& m : snapshot.devices[0].resident)
      resident |= m.model == "small";
    CHECK(resident);
  }

  // unregister.
  {
    auto req = c.warm.unregisterModelRequest();
    req.setId("other");
    CHECK(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
    CHECK(c.status("other").state == warm::model_state::not_found);
  }

  CHECK(d.stop() == 0);
}

TEST_CASE("a watcher sees the state changes of a load") {
  warmd_process d;
  d.write_model("m", {8, 16, 4});
  d.start();
  client c(d.address());
  REQUIRE(c.register_model("m", "m") == Code::OK);

  std::vector<warm::model_event> events;
  auto req = c.warm.watchRequest();
  req.setListener(kj::heap<recorder>(events));
  auto res = req.send().wait(c.ws());
  REQUIRE(res.getStatus().getCode() == Code::OK);
  auto handle = res.getHandle();

  REQUIRE(c.ensure("m") == Code::OK);
  auto& timer = c.ez.getIoProvider().getTimer();
  auto loaded = [&] {
    for (auto& e : events)
      if (e.model == "m" && e.state == warm::model_state::loaded) return true;
    return false;
  };
  for (int i = 0; i < 250 && !loaded(); ++i)
    timer.afterDelay(20 * kj::MILLISECONDS).wait(c.ws());
  REQUIRE(loaded());

  std::vector<warm::model_state> states;
  for (auto& e : events)
    if (e.model == "m") states.push_back(e.state);
  auto at = [&](warm::model_state s) {
    return std::find(states.begin(), states.end(), s) - states.begin();
  };
  CHECK(at(warm::model_state::queued) < at(warm::model_state::loading));
  CHECK(at(warm::model_state::loading) < at(warm::model_state::loaded));
  CHECK(at(warm::model_state::loaded) < static_cast<long>(states.size()));
  for (std::size_t i = 1; i < events.size(); ++i)
    CHECK(events[i].sequence > events[i - 1].sequence);

  CHECK(d.stop() == 0);
}

TEST_CASE("a restart on the same state directory keeps registrations and vmodels") {
  warmd_process d;
  d.write_model("a", {8, 4});
  d.write_model("b", {8, 4});
  d.start();
  {
    client c(d.address());
    REQUIRE(c.register_model("a", "a") == Code::OK);
    REQUIRE(c.register_model("b", "b", true, true) == Code::OK);
    auto req = c.warm.setVModelRequest();
    req.setId("v");
    req.setTarget("a");
    REQUIRE(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
  }
  REQUIRE(d.stop() == 0);
  d.start();
  {
    client c(d.address());
    CHECK(c.status("a").state == warm::model_state::not_loaded);
    auto b = c.status("b");
    CHECK(b.state == warm::model_state::not_loaded);
    // Not used since the restart, yet its size and widths show (read for the status).
    CHECK(b.bytes > 0);
    CHECK(b.input_width == 8);
    CHECK(b.output_width == 4);
    auto req = c.warm.getVModelStatusRequest();
    req.setId("v");
    auto res = req.send().wait(c.ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    CHECK(std::string(res.getVmodel().getActive().cStr()) == "a");
    // Registering the same model again is still idempotent after the restart.
    CHECK(c.register_model("a", "a") == Code::OK);
  }
  CHECK(d.stop() == 0);
}

TEST_CASE("SIGINT stops warmd gracefully, like SIGTERM: exit 0 and the state survives") {
  warmd_process d;
  d.write_model("a", {8, 4});
  d.start();
  {
    client c(d.address());
    REQUIRE(c.register_model("a", "a", true, true) == Code::OK);
    REQUIRE(c.status("a").state == warm::model_state::loaded);
  }
  REQUIRE(d.interrupt() == 0);
  CHECK_FALSE(fs::exists(d.socket()));  // the listener was closed and its socket removed
  d.start();
  {
    client c(d.address());
    auto a = c.status("a");
    CHECK(a.state == warm::model_state::not_loaded);
    CHECK(a.input_width == 8);
    auto req = c.warm.inferRequest();
    r::to_capnp(warm::infer_request{"a", {input(8)}}, req.initRequest());
    CHECK(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
  }
  CHECK(d.stop() == 0);
}

TEST_CASE("each device may name its own policy; the policies' tuning flags are checked") {
  warmd_process d;
  d.device = "host.0:1MiB@lru";
  d.start({"--device", "host.1:1MiB", "--policy", "gdsf", "--rescore-period", "50ms", "--iam-rate",
           "window"});
  {
    client c(d.address());
    auto res = c.warm.inspectRequest().send().wait(c.ws());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    auto snapshot = r::from_capnp(res.getInspection());
    REQUIRE(snapshot.devices.size() == 2);
    CHECK(snapshot.devices[0].policy == "lru");
    CHECK(snapshot.devices[1].policy == "gdsf");
  }
  CHECK(d.stop() == 0);
  CHECK(d.run_to_exit({"--device", "host:1MiB@nosuch"}) == 2);  // an unknown policy: usage error
  CHECK(d.run_to_exit({"--iam-rate", "median"}) == 2);
}
