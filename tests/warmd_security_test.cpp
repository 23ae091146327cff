// Black-box tests of the daemon's exposure and robustness: TCP listeners (loopback without
// --allow-remote; an Authenticator bootstrap and a token with it; refused configurations exit 2),
// request limits (--max-tensor-bytes answers tooLarge and keeps the connection, also for a request
// larger than Cap'n Proto's default reader limit), the unix socket's
// mode (0600 whatever the umask), and kill -9 at random moments during loads, registrations and
// vmodel changes (every acknowledged one survives the restarts). The real build/warmd (path in
// $WARMD, set by meson) runs on a temporary directory and is driven over Cap'n Proto.
#include <catch2/catch.hpp>

#include <capnp/ez-rpc.h>
#include <fcntl.h>
#include <kj/async-io.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
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

// A status call on `warm` (an unknown id answers ok with state notFound): true when it worked.
bool status_works(r::Warm::Client& warm, kj::WaitScope& ws) {
  auto req = warm.getModelStatusRequest();
  req.setId("no-such-model");
  auto res = req.send().wait(ws);
  return res.getStatus().getCode() == Code::OK &&
         res.getModel().getState() == r::ModelState::NOT_FOUND;
}

// An F32 input [1, width] of 0.5s.
warm::tensor input(std::uint64_t width) {
  warm::tensor t;
  t.name = "input";
  t.shape = {1, width};
  t.data.resize(width * 4);
  float v = 0.5f;
  for (std::uint64_t i = 0; i < width; ++i)
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  return t;
}

// A client whose reader (and so its sender) takes messages up to 2 GiB, connected to `d` with
// model `id` registered: for requests past Cap'n Proto's default 64 MiB.
struct large_client {
  large_client(warm::test::warmd_process& d, const std::string& id)
      : ez(d.address(), 0, options()), warm(ez.getMain<r::Warm>()) {
    auto reg = warm.registerModelRequest();
    reg.setId(id);
    reg.getInfo().setPath(id);
    REQUIRE(reg.send().wait(ws()).getStatus().getCode() == Code::OK);
  }
  static capnp::ReaderOptions options() {
    capnp::ReaderOptions large;
    large.traversalLimitInWords = std::uint64_t{1} << 28;
    return large;
  }
  kj::WaitScope& ws() { return ez.getWaitScope(); }

  capnp::EzRpcClient ez;
  r::Warm::Client warm;
};

class ignore_errors final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&&) override {}
};

std::string write_token(const fs::path& path, const std::string& token) {
  std::ofstream(path) << token << "\n";
  fs::permissions(path,
                  fs::perms::owner_read | fs::perms::owner_write);  // warmd refuses a looser one
  return path.string();
}

}  // namespace

TEST_CASE("a loopback TCP listener without --allow-remote serves Warm directly") {
  warmd_process d;
  d.log_level = "info";
  d.start({"--listen", "127.0.0.1:0"});
  auto port = d.announced_port("listening on 127.0.0.1:");
  capnp::EzRpcClient tcp("127.0.0.1", port);
  auto warm = tcp.getMain<r::Warm>();
  CHECK(status_works(warm, tcp.getWaitScope()));
  CHECK(d.stop() == 0);
}

TEST_CASE("with --allow-remote the TCP bootstrap is an Authenticator that wants the token") {
  warmd_process d;
  const std::string token = "0123456789abcdef-the-right-token";
  auto token_file = write_token(d.dir() / "token", token);
  d.log_level = "info";
  // 127.0.0.1 stands in for a remote-reachable host: the bootstrap depends on --allow-remote only.
  d.start({"--listen", "127.0.0.1:0", "--allow-remote", "--token-file", token_file});
  auto port = d.announced_port("listening on 127.0.0.1:");

  capnp::EzRpcClient tcp("127.0.0.1", port);
  auto& ws = tcp.getWaitScope();
  auto auth = tcp.getMain<r::Authenticator>();

  SECTION("the right token gets a working Warm") {
    auto req = auth.authenticateRequest();
    req.setToken(token);
    auto res = req.send().wait(ws);
    REQUIRE(res.getStatus().getCode() == Code::OK);
    REQUIRE(res.hasWarm());
    auto warm = res.getWarm();
    CHECK(status_works(warm, ws));
  }
  SECTION("a wrong token gets unauthenticated and no capability") {
    for (std::string wrong : {std::string("0123456789abcdef-the-wrong-token"),
                              token.substr(0, token.size() - 1), token + "x", std::string()}) {
      auto req = auth.authenticateRequest();
      req.setToken(wrong);
      auto res = req.send().wait(ws);
      CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
      CHECK_FALSE(res.hasWarm());
      auto warm = res.getWarm();  // a null capability: every call fails
      CHECK_THROWS(warm.getModelStatusRequest().send().wait(ws));
    }
    // The connection still answers, and the right token still works after wrong ones.
    auto req = auth.authenticateRequest();
    req.setToken(token);
    CHECK(req.send().wait(ws).getStatus().getCode() == Code::OK);
  }
  SECTION("the bootstrap is not Warm: calling Warm's methods on it fails") {
    auto warm = tcp.getMain<r::Warm>();
    CHECK_THROWS(status_works(warm, ws));
  }
  CHECK(d.stop() == 0);
}

TEST_CASE("refused exposure: usage errors exit 2") {
  warmd_process d;
  const std::string port = "0";  // never bound: each run stops at its usage check
  SECTION("--allow-remote without --token-file") {
    CHECK(d.run_to_exit({"--listen", "127.0.0.1:" + port, "--allow-remote"}) == 2);
  }
  SECTION("a non-loopback address without --allow-remote") {
    CHECK(d.run_to_exit({"--listen", "0.0.0.0:" + port}) == 2);
  }
  SECTION("a token file holding a short token") {
    auto token_file = write_token(d.dir() / "token", "short");
    CHECK(d.run_to_exit({"--listen", "127.0.0.1:" + port, "--allow-remote", "--token-file",
                         token_file}) == 2);
  }
}

TEST_CASE("--max-tensor-bytes: a larger input tensor is tooLarge and the connection stays usable") {
  warmd_process d;
  d.write_model("wide", {512, 4});  // input: 512 F32 = 2048 bytes
  d.write_model("narrow", {8, 4});  // input: 32 bytes
  d.start({"--max-tensor-bytes", "1024"});
  capnp::EzRpcClient c(d.address());
  auto& ws = c.getWaitScope();
  auto warm = c.getMain<r::Warm>();
  for (auto id : {"wide", "narrow"}) {
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath(id);
    REQUIRE(req.send().wait(ws).getStatus().getCode() == Code::OK);
  }
  auto infer = [&](const std::string& target, std::uint64_t width) {
    auto req = warm.inferRequest();
    r::to_capnp(warm::infer_request{target, {input(width)}}, req.initRequest());
    return req.send().wait(ws);
  };
  {
    auto res = infer("wide", 512);
    CHECK(res.getStatus().getCode() == Code::TOO_LARGE);
    CHECK(std::string(res.getStatus().getMessage().cStr()).find("1024") != std::string::npos);
    CHECK_FALSE(res.hasResult());
  }
  CHECK(status_works(warm, ws));
  CHECK(infer("narrow", 8).getStatus().getCode() == Code::OK);
  CHECK(infer("wide", 512).getStatus().getCode() == Code::TOO_LARGE);  // again, same connection
  CHECK(status_works(warm, ws));
  CHECK(d.stop() == 0);
}

TEST_CASE("a request over Cap'n Proto's default 64 MiB limit is answered; the connection lives") {
  // 72 MiB of input: more than Cap'n Proto reads by default, less than --max-request-bytes, more
  // than --max-tensor-bytes (default 64 MiB). The server must read it and answer tooLarge.
  warmd_process d;
  d.write_model("m", {8, 4});
  d.start({"--max-request-bytes", "96MiB"});
  large_client c(d, "m");  // a client refuses to send what it would not read itself
  auto& ws = c.ws();
  auto& warm = c.warm;
  {
    constexpr std::uint64_t width = (72ull << 20) / 4;
    auto req = warm.inferRequest();
    auto request = req.initRequest();
    request.setTarget("m");
    auto t = request.initInputs(1)[0];
    t.setName("input");
    t.setDtype("F32");
    auto shape = t.initShape(2);
    shape.set(0, 1);
    shape.set(1, width);
    t.initData(static_cast<unsigned>(width * 4));  // zeros: only the size matters
    auto res = req.send().wait(ws);
    CHECK(res.getStatus().getCode() == Code::TOO_LARGE);
    CHECK(std::string(res.getStatus().getMessage().cStr()).find(std::to_string(64ull << 20)) !=
          std::string::npos);
  }
  CHECK(status_works(warm, ws));  // the same connection still works
  auto req = warm.inferRequest();
  r::to_capnp(warm::infer_request{"m", {input(8)}}, req.initRequest());
  CHECK(req.send().wait(ws).getStatus().getCode() == Code::OK);
  CHECK(d.stop() == 0);
}

TEST_CASE("a 48 MB tensor within every limit is checked by the model, not refused by Cap'n Proto") {
  // The server reads a request's data several times (size check, tensor check, copy), and Cap'n
  // Proto counts each read: with its default 64 MiB traversal limit this request failed with
  // "Exceeded message traversal limit" instead of reaching the model.
  warmd_process d;
  d.write_model("m", {8, 4});
  d.start();
  large_client c(d, "m");
  auto& ws = c.ws();
  auto& warm = c.warm;
  auto req = warm.inferRequest();
  r::to_capnp(warm::infer_request{"m", {input(12'000'000)}}, req.initRequest());
  auto res = req.send().wait(ws);
  CHECK(res.getStatus().getCode() == Code::INVALID_ARGUMENT);  // the model takes width 8
  CHECK(
      std::string(res.getStatus().getMessage().cStr()).find("the model takes input F32 [-1, 8]") !=
      std::string::npos);
  CHECK(status_works(warm, ws));
  CHECK(d.stop() == 0);
}

TEST_CASE("--max-models: one registration past the limit is capacityExhausted, naming it") {
  warmd_process d;
  d.write_model("m", {8, 4});
  d.start({"--max-models", "2"});
  capnp::EzRpcClient c(d.address());
  auto& ws = c.getWaitScope();
  auto warm = c.getMain<r::Warm>();
  auto register_as = [&](const std::string& id) {
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath("m");
    return req.send().wait(ws);
  };
  CHECK(register_as("a").getStatus().getCode() == Code::OK);
  CHECK(register_as("b").getStatus().getCode() == Code::OK);
  auto third = register_as("c");
  CHECK(third.getStatus().getCode() == Code::CAPACITY_EXHAUSTED);
  CHECK(std::string(third.getStatus().getMessage().cStr()).find("2 models") != std::string::npos);
  CHECK(register_as("a").getStatus().getCode() == Code::OK);  // re-registering is not a new model
  CHECK(d.stop() == 0);
  CHECK(d.run_to_exit({"--max-models", "0"}) == 2);
}

TEST_CASE("the unix socket file is mode 0600 whatever the umask") {
  warmd_process d;
  d.child_umask = 0;  // would give 0777 to a socket created naively
  d.start();
  struct stat st {};
  REQUIRE(::lstat(d.socket().c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(d.stop() == 0);
}

// What a crash run acknowledged: models, and vmodels with the target each was set to.
struct acknowledged {
  std::set<std::string> models;
  std::map<std::string, std::string> vmodels;
};

// Drives registrations (each with loadNow, so loads run) and, after every fifth acknowledged one,
// a vmodel pointed at it, four requests outstanding, then kills warmd with SIGKILL at a random
// moment. Ids continue from `next`. Records every acknowledged request in `acked`.
void register_until_killed(warmd_process& d, std::mt19937& rng, int files, int& next,
                           acknowledged& acked) {
  capnp::EzRpcClient c(d.address());
  auto& ws = c.getWaitScope();
  auto& timer = c.getIoProvider().getTimer();
  auto warm = c.getMain<r::Warm>();
  const int outstanding = 4;
  int sent = 0, failed = 0, answered = 0;
  ignore_errors errors;
  kj::TaskSet tasks(errors);
  std::function<void()> send_one = [&] {
    char id[16];
    std::snprintf(id, sizeof(id), "m%07d", next++);
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath("f" + std::to_string(next % files));
    req.setLoadNow(true);
    ++sent;
    tasks.add(req.send().then(
        [&, name = std::string(id)](capnp::Response<r::Warm::RegisterModelResults>&& res) {
          ++answered;
          if (res.getStatus().getCode() != Code::OK) return void(++failed);
          acked.models.insert(name);
          if (acked.models.size() % 5 == 0) {
            auto vid = "v" + name;
            auto set = warm.setVModelRequest();
            set.setId(vid);
            set.setTarget(name);
            tasks.add(set.send().then(
                [&, vid, name](capnp::Response<r::Warm::SetVModelResults>&& res) {
                  if (res.getStatus().getCode() == Code::OK) acked.vmodels[vid] = name;
                },
                [](kj::Exception&&) {}));
          }
          send_one();
        },
        [&](kj::Exception&&) { ++failed; }));  // the daemon died with it in flight
  };
  for (int i = 0; i < outstanding; ++i)
    send_one();

  // Some acknowledgements first, then a random moment.
  auto before = acked.models.size();
  for (int i = 0; i < 1000 && acked.models.size() < before + 5; ++i)
    timer.afterDelay(5 * kj::MILLISECONDS).wait(ws);
  REQUIRE(acked.models.size() >= before + 5);
  auto delay = std::uniform_int_distribution<int>(0, 300)(rng);
  timer.afterDelay(delay * kj::MILLISECONDS).wait(ws);
  {
    auto snapshot = warm.inspectRequest().send().wait(ws);  // loads were going on
    REQUIRE(snapshot.getStatus().getCode() == Code::OK);
    CHECK(snapshot.getInspection().getLoadsStarted() > 0);
  }
  d.crash();
  timer.afterDelay(100 * kj::MILLISECONDS).wait(ws);  // answers sent before the death count too
  INFO("killed after " << delay << " ms with " << acked.models.size() << " acked, " << sent
                       << " sent");
  CHECK(failed <= outstanding);  // only the ones in flight at the kill
  CHECK(sent > answered);        // registrations were in flight at the kill
}

TEST_CASE(
    "kill -9 at random moments during loads, registrations and vmodel changes loses nothing "
    "acknowledged") {
  warmd_process d;
  d.device = "host:24MiB";  // room for two of the 8 MiB models: loads evict and keep loading
  const auto widths = warm::widths_for_bytes(8u << 20, 1024, 16);
  const int files = 4;
  for (int f = 0; f < files; ++f)
    d.write_model("f" + std::to_string(f), widths);

  // A new seed each run (WARM_TEST_SEED repeats one); the seed is printed so a failure can be.
  std::uint32_t seed = std::random_device{}();
  if (const char* env = std::getenv("WARM_TEST_SEED"))
    seed = static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10));
  std::printf("kill -9 test: seed %u (repeat with WARM_TEST_SEED=%u)\n", seed, seed);
  std::fflush(stdout);
  INFO("seed " << seed << " (repeat with WARM_TEST_SEED=" << seed << ")");
  std::mt19937 rng(seed);
  acknowledged acked;
  int next = 0;
  for (int round = 0; round < 3; ++round) {
    d.start();
    register_until_killed(d, rng, files, next, acked);
  }
  REQUIRE(acked.vmodels.size() >= 1);

  d.start();
  capnp::EzRpcClient c(d.address());
  auto& ws = c.getWaitScope();
  auto warm = c.getMain<r::Warm>();
  std::set<std::string> listed;
  std::string after;
  for (int pages = 0; pages < 100; ++pages) {
    auto req = warm.listModelsRequest();
    req.setAfter(after);
    auto res = req.send().wait(ws);
    REQUIRE(res.getStatus().getCode() == Code::OK);
    for (auto m : res.getModels())
      listed.insert(m.getId().cStr());
    after = res.getNext().cStr();
    if (after.empty()) break;
  }
  std::vector<std::string> missing;
  std::set_difference(acked.models.begin(), acked.models.end(), listed.begin(), listed.end(),
                      std::back_inserter(missing));
  INFO("missing after the restarts: " << missing.size() << " of " << acked.models.size()
                                      << (missing.empty() ? "" : ", first " + missing.front()));
  CHECK(missing.empty());

  // Every acknowledged vmodel is back, pointing at its model, which is registered; it serves.
  for (auto& [vid, target] : acked.vmodels) {
    auto req = warm.getVModelStatusRequest();
    req.setId(vid);
    auto res = req.send().wait(ws);
    INFO("vmodel " << vid);
    REQUIRE(res.getStatus().getCode() == Code::OK);
    CHECK(std::string(res.getVmodel().getTarget().cStr()) == target);
    CHECK(std::string(res.getVmodel().getActive().cStr()) == target);
    CHECK(listed.count(target) == 1);
  }
  auto vid = acked.vmodels.begin()->first;
  {
    auto req = warm.inferRequest();
    r::to_capnp(warm::infer_request{vid, {input(widths.front())}}, req.initRequest());
    auto res = req.send().wait(ws);
    REQUIRE(res.getStatus().getCode() == Code::OK);
    CHECK(std::string(res.getResult().getModel().cStr()) == acked.vmodels.begin()->second);
    REQUIRE(res.getResult().getOutputs().size() == 1);
    CHECK(res.getResult().getOutputs()[0].getData().size() == widths.back() * 4);
  }
  CHECK(d.stop() == 0);
}
