// warm-bench cluster: warmd instances in a cluster, as processes, with a real etcd.
//
// It starts etcd (tests/support/etcd_member) and N warmd (beside warm-bench, or --warmd) on unix
// sockets in one cluster, registers the models once (the registry is the cluster's), and measures:
//  - ratio: batch-1 inference of a model resident on instance 1, through instance 1 (local) and
//    through instance 2 (forwarded one hop over Cap'n Proto), in rotated rounds; the median over
//    rounds of forwarded_rps / local_rps.
//  - max_share: `cold` models that no instance holds, one request each, sent at once through the
//    instances in turn; the largest share of them loaded on one instance (1/N is perfect), and
//    how many loads ran in the cluster (one per model is the contract).
//  - failover_s: a model resident only on the last instance, which is killed (SIGKILL); the time
//    from the kill to the first answer for that model through instance 1.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "rpc/convert.hpp"
#include "rpc_calls.hpp"
#include "support/etcd_member.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

extern char** environ;

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// One warmd process, killed (SIGKILL) if still running when this goes.
class warmd_process {
 public:
  warmd_process(const std::vector<std::string>& argv, const std::string& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~warmd_process() { kill(); }
  warmd_process(const warmd_process&) = delete;
  warmd_process& operator=(const warmd_process&) = delete;

  bool started() const { return pid_ > 0; }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // SIGTERM, then SIGKILL after 10 s.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
  }

 private:
  pid_t pid_ = -1;
};

// Synchronous calls to one instance, on the calling thread's kj event loop.
class instance_client {
 public:
  instance_client(kj::AsyncIoContext& io, const std::string& socket) : io_(io) {
    auto address = io.provider->getNetwork().parseAddress("unix:" + socket).wait(io.waitScope);
    stream_ = address->connect().wait(io.waitScope);
    client_ = kj::heap<capnp::TwoPartyClient>(*stream_);
    warm_ = client_->bootstrap().castAs<rpc::Warm>();
  }

  expected<void> register_model(const std::string& id) {
    auto req = warm_.registerModelRequest();
    req.setId(id);
    rpc::to_capnp(model_info(id), req.initInfo());  // not loaded: sync would wait for a load
    return rpc::from_capnp(req.send().wait(io_.waitScope).getStatus());
  }
  expected<void> ensure(const std::string& id) {
    auto req = warm_.ensureLoadedRequest();
    req.setId(id);
    req.setSync(true);
    return rpc::from_capnp(req.send().wait(io_.waitScope).getStatus());
  }
  model_status status(const std::string& id) {
    auto req = warm_.getModelStatusRequest();
    req.setId(id);
    return rpc::from_capnp(req.send().wait(io_.waitScope).getModel());
  }
  cluster_info cluster() {
    return rpc::from_capnp(warm_.clusterInfoRequest().send().wait(io_.waitScope).getCluster());
  }
  // Sends an inference and returns its promise: the answer's status.
  kj::Promise<expected<void>> infer(const std::string& id, const tensor& input) {
    auto req = warm_.inferRequest();
    fill_infer_request(req.initRequest(), id, input);
    return req.send().then([](capnp::Response<rpc::Warm::InferResults>&& r) {
      return rpc::from_capnp(r.getStatus());
    });
  }
  expected<void> infer_now(const std::string& id, const tensor& input) {
    return infer(id, input).wait(io_.waitScope);
  }

 private:
  kj::AsyncIoContext& io_;
  kj::Own<kj::AsyncIoStream> stream_;
  kj::Own<capnp::TwoPartyClient> client_;
  rpc::Warm::Client warm_ = nullptr;
};

bool wait_until(const std::function<bool()>& ready, std::chrono::seconds limit) {
  const auto until = clock_type::now() + limit;
  while (clock_type::now() < until) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool lists(const cluster_info& c, const std::string& instance, const std::string& model) {
  for (const auto& x : c.instances)
    if (x.name == instance)
      return std::binary_search(x.residents.begin(), x.residents.end(), model);
  return false;
}

}  // namespace

int run_cluster(const cluster_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench cluster: %s\n", message.c_str());
    return 1;
  };
  if (options.instances < 2) return fail("--instances must be at least 2");
  if (test::etcd_member::executable().empty())
    return fail("needs etcd (/usr/bin/etcd or $ETCD; tools/deps installs it)");
  auto warmd = options.warmd;
  if (warmd.empty()) {
    std::error_code ec;
    warmd = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "warmd").string();
  }
  if (!std::filesystem::exists(warmd)) return fail("no warmd at " + warmd + " (--warmd)");

  scratch_dir dir("cluster");
  const auto repo = dir.path() / "repo";
  auto write = [&](const std::string& id, const std::vector<std::uint64_t>& layers,
                   std::uint64_t seed) {
    return write_dense_model((repo / id / "1" / model_file_name).string(),
                             {layers, activation::relu, seed});
  };
  std::vector<std::string> cold;
  for (int i = 0; i < options.cold; ++i)
    cold.push_back("cold-" + std::to_string(i));
  if (auto r = write("hot", options.layers, 1); !r) return fail(r.error().to_string());
  if (auto r = write("failover", options.layers, 2); !r) return fail(r.error().to_string());
  for (std::size_t i = 0; i < cold.size(); ++i)
    if (auto r = write(cold[i], options.layers, 10 + i); !r) return fail(r.error().to_string());

  test::etcd_member etcd;
  if (auto r = etcd.start(); !r) return fail("etcd: " + r.error().to_string());
  std::vector<std::unique_ptr<warmd_process>> procs;
  std::vector<std::string> names, sockets;
  for (int i = 1; i <= options.instances; ++i) {
    names.push_back("i" + std::to_string(i));
    sockets.push_back((dir.path() / (names.back() + ".sock")).string());
    procs.push_back(std::make_unique<warmd_process>(
        std::vector<std::string>{warmd,
                                 "--repo",
                                 repo.string(),
                                 "--state",
                                 (dir.path() / ("state-" + names.back())).string(),
                                 "--device",
                                 "host:1GiB",
                                 "--listen",
                                 "unix:" + sockets.back(),
                                 "--cluster",
                                 etcd.endpoint(),
                                 "--instance",
                                 names.back(),
                                 "--cluster-name",
                                 "bench",
                                 "--lease-ttl",
                                 std::to_string(options.lease_ttl),
                                 "--drain-seconds",
                                 "0",
                                 "--copy-queue",
                                 "0"},  // the hot model stays one copy: forwards measure the hop
        (dir.path() / (names.back() + ".log")).string()));
    if (!procs.back()->started()) return fail("cannot start " + warmd);
  }
  for (const auto& s : sockets)
    if (!wait_until([&] { return std::filesystem::exists(s); }, std::chrono::seconds(20)))
      return fail("warmd did not listen on " + s + " (its log: " + s.substr(0, s.size() - 5) +
                  ".log)");

  auto io = kj::setupAsyncIo();
  std::vector<std::unique_ptr<instance_client>> clients;
  for (const auto& s : sockets)
    clients.push_back(std::make_unique<instance_client>(io, s));
  auto& first = *clients.front();
  auto everyone_sees_all = [&] {
    for (auto& c : clients)
      if (c->cluster().instances.size() != static_cast<std::size_t>(options.instances))
        return false;
    return true;
  };
  if (!wait_until(everyone_sees_all, std::chrono::seconds(20)))
    return fail("the instances did not all join");
  for (const auto& id : std::vector<std::string>{"hot", "failover"})
    if (auto r = first.register_model(id); !r)
      return fail("register " + id + ": " + r.error().to_string());
  for (const auto& id : cold)
    if (auto r = first.register_model(id); !r)
      return fail("register " + id + ": " + r.error().to_string());
  auto known_everywhere = [&] {
    for (auto& c : clients)
      if (c->status(cold.empty() ? "failover" : cold.back()).state == model_state::not_found)
        return false;
    return true;
  };
  if (!wait_until(known_everywhere, std::chrono::seconds(10)))
    return fail("the registry did not reach every instance");

  // Local against forwarded.
  if (auto r = first.ensure("hot"); !r) return fail("load hot: " + r.error().to_string());
  if (!wait_until([&] { return lists(clients[1]->cluster(), names[0], "hot"); },
                  std::chrono::seconds(10)))
    return fail("i2 does not see hot on i1");
  const tensor input = random_input(options.layers.front());
  const double phase_seconds = options.seconds / (2.0 * options.rounds);
  std::vector<double> local_rps, forwarded_rps, ratios;
  for (int round = 0; round < options.rounds; ++round) {
    double local = 0, forwarded = 0;
    for (bool via_peer : rotated_order<bool>({false, true}, round)) {
      auto r =
          run_rpc_phase(sockets[via_peer ? 1 : 0], options.clients, phase_seconds, "hot", input);
      if (!r.failure.empty()) return fail((via_peer ? "forwarded: " : "local: ") + r.failure);
      (via_peer ? forwarded : local) = r.rps;
    }
    local_rps.push_back(local);
    forwarded_rps.push_back(forwarded);
    ratios.push_back(forwarded / local);
  }

  // Cold models at once, through every instance in turn.
  const auto storm_start = clock_type::now();
  {
    kj::Vector<kj::Promise<expected<void>>> answers;
    for (std::size_t i = 0; i < cold.size(); ++i)
      answers.add(clients[i % clients.size()]->infer(cold[i], input));
    auto all = kj::joinPromises(answers.releaseAsArray()).wait(io.waitScope);
    for (auto& a : all)
      if (!a) return fail("a cold request failed: " + a.error().to_string());
  }
  const double storm_s = std::chrono::duration<double>(clock_type::now() - storm_start).count();
  std::vector<std::uint64_t> held(clients.size(), 0);
  std::uint64_t cold_loads = 0;
  for (const auto& id : cold)
    for (std::size_t i = 0; i < clients.size(); ++i) {
      auto s = clients[i]->status(id);
      if (s.state == model_state::loaded) ++held[i];
      cold_loads += s.loads.count;
    }
  const double max_share = cold.empty()
                               ? 0
                               : static_cast<double>(*std::max_element(held.begin(), held.end())) /
                                     static_cast<double>(cold.size());

  // Failover: the model's only copy goes with its instance.
  auto& last = *clients.back();
  if (auto r = last.ensure("failover"); !r) return fail("load failover: " + r.error().to_string());
  if (!wait_until([&] { return lists(first.cluster(), names.back(), "failover"); },
                  std::chrono::seconds(10)))
    return fail("i1 does not see failover on " + names.back());
  clients.pop_back();
  const auto killed = clock_type::now();
  procs.back()->kill();
  expected<void> answered = make_error(errc::unavailable, "not asked");
  while (!(answered = first.infer_now("failover", input)) &&
         clock_type::now() - killed < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!answered)
    return fail("failover was not served within 60 s: " + answered.error().to_string());
  const double failover_s = std::chrono::duration<double>(clock_type::now() - killed).count();
  const double load_ms = first.status("failover").loads.mean_ms;

  nlohmann::ordered_json out{
      {"scenario", "cluster"},          {"instances", options.instances},
      {"clients", options.clients},     {"layers", options.layers},
      {"local_rps", median(local_rps)}, {"forwarded_rps", median(forwarded_rps)},
      {"ratio", median(ratios)},        {"failover_s", failover_s},
      {"failover_load_ms", load_ms},    {"lease_ttl_s", options.lease_ttl},
      {"cold_models", cold.size()},     {"cold_loads", cold_loads},
      {"cold_storm_s", storm_s},        {"held", held},
      {"max_share", max_share},         {"rounds", options.rounds}};
  std::printf("%s\n", out.dump().c_str());
  clients.clear();
  for (auto& p : procs)
    p->stop();
  return 0;
}

}  // namespace warm::bench
