// warm-bench soak: mixed traffic over Cap'n Proto against a runtime whose loads fail, for a long
// time, counting every request and every answer.
//
// The runtime (one process, as in `rpc`): a scratch repository of `models` small dense models
// (m00, m01, ...: [64, hidden, 16], sizes spread geometrically from 64 KiB to 2 MiB) on one host
// device holding about 40% of them (at least twice the largest), so loads, evictions and failures
// interleave. Its loader is a faulty_loader (warm/fault_injection.hpp) failing `failure_rate` of
// loads after a random 0-5 ms delay; failure_expiry is 200 ms, so a failed model loads again soon.
// Its host device comes from faulty_device_factory: --allocation-failure-rate (default 0) of its
// allocations fail as out of memory.
// Every model is registered and each client gets a vmodel vm-cN (between two of the models) before
// the clock starts. warmd's RPC service serves the runtime on a unix socket in a scratch dir.
//
// `clients` client threads, each with its own kj event loop and capnp::TwoPartyClient, then run a
// closed loop (one call outstanding each) for `seconds`:
//   62%  infer, batch 1, fresh random input: a random model (75%), the client's vmodel (15%) or
//        its scratch model scratch-cN (10%, whether registered at that moment or not)
//   12%  ensureLoaded of a random model, sync half of the time
//   12%  register / unregister of scratch-cN (alternately; loadNow half, sync a quarter of the
//   time) 14%  setVModel flipping vm-cN to its other model; a fifth of them a compare-and-set with
//   the
//        right expectedTarget, one in twenty with a wrong one (an invalidArgument answer)
// Every call sent counts as a request; every answer (any status) as a reply. A call that fails
// with an exception (dropped, disconnected) or gets no answer within 30 s is `lost`; a client
// whose connection broke reconnects. errors_by_code counts the non-OK answers by status code.
// The process's resident set (/proc/self/statm) is sampled every second while traffic runs.
//
// Then: traffic stops, the service stops, in-flight loads settle, every vmodel is deleted and every
// model unregistered (through the runtime), and once the devices are idle (polled up to 10 s),
// accounting_drift_bytes = the sum of device::used() over the devices (nothing is registered, so
// anything charged is leaked accounting). rss_growth_pct = (mean RSS of the last quarter of the
// samples - mean of the first quarter) / mean of the first quarter x 100.
//
// Exits 1 when lost > 0, drift != 0 or rss_growth_pct >= 5 (the soak's pass criteria), or the bench
// itself could not run. WARM_BENCH_VERBOSE=1 prints every RSS sample, the first message of every
// error code and every lost call to stderr.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/timer.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "../warmd/service.hpp"
#include "benches.hpp"
#include "rpc/convert.hpp"
#include "warm.capnp.h"
#include "warm/fault_injection.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t input_width = 64;
constexpr std::uint64_t output_width = 16;
constexpr std::uint64_t smallest_model = std::uint64_t{64} << 10;
constexpr std::uint64_t largest_model = std::uint64_t{2} << 20;
const kj::Duration call_deadline = 30 * kj::SECONDS;

bool verbose() {
  return std::getenv("WARM_BENCH_VERBOSE") != nullptr;
}

struct soak_model {
  std::string id;
  std::vector<std::uint64_t> widths;
  std::uint64_t bytes = 0;
};

std::string client_vmodel(int c) {
  return "vm-c" + std::to_string(c);
}
std::string client_scratch(int c) {
  return "scratch-c" + std::to_string(c);
}
// The two models client c's vmodel flips between, and the file its scratch model names.
std::size_t vmodel_a(int c, std::size_t n) {
  return (2 * static_cast<std::size_t>(c)) % n;
}
std::size_t vmodel_b(int c, std::size_t n) {
  return (2 * static_cast<std::size_t>(c) + 1) % n;
}
std::size_t scratch_file(int c, std::size_t n) {
  return (3 * static_cast<std::size_t>(c) + 1) % n;
}

// Resident bytes of this process.
std::uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

struct alignas(64) client_tally {
  std::uint64_t requests = 0;
  std::uint64_t replies = 0;
  std::uint64_t lost = 0;
  std::uint64_t reconnects = 0;
  std::map<std::string, std::uint64_t> errors_by_code;
  std::map<std::string, std::string> first_error;  // code -> the first message seen
  std::map<std::string, std::uint64_t> calls;      // by method
  std::vector<std::string> lost_calls;             // the first few: method and why
  double max_call_ms = 0;
  std::string fatal;  // the client could not (re)connect and stopped
};

// One client thread: its own event loop and connection, a closed loop of mixed calls.
class soak_client {
 public:
  soak_client(int index, std::string socket, const std::vector<soak_model>& models,
              std::uint64_t seed, client_tally& tally)
      : index_(index),
        socket_(std::move(socket)),
        models_(models),
        rng_(seed),
        tally_(tally),
        vmodel_(client_vmodel(index)),
        scratch_(client_scratch(index)),
        target_a_(models[vmodel_a(index, models.size())].id),
        target_b_(models[vmodel_b(index, models.size())].id),
        vmodel_target_(target_a_) {}

  void run(clock_type::time_point deadline) {
    try {
      auto io = kj::setupAsyncIo();
      io_ = &io;
      KJ_DEFER(conn_.reset(); io_ = nullptr);  // the connection goes before its event loop
      if (!connect()) return;
      while (clock_type::now() < deadline) {
        if (broken_ && !connect()) return;
        step();
      }
    } catch (const kj::Exception& e) {
      tally_.fatal =
          std::string("client ") + std::to_string(index_) + ": " + e.getDescription().cStr();
    }
  }

 private:
  struct connection {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> client;
    rpc::Warm::Client warm = nullptr;
    // Users first: the capability, then the client, then the stream it reads.
    void reset() {
      warm = nullptr;
      client = nullptr;
      stream = nullptr;
    }
  };

  bool connect() {
    conn_.reset();
    try {
      auto& ws = io_->waitScope;
      auto addr = io_->provider->getNetwork().parseAddress("unix:" + socket_).wait(ws);
      conn_.stream = addr->connect().wait(ws);
      conn_.client = kj::heap<capnp::TwoPartyClient>(*conn_.stream);
      conn_.warm = conn_.client->bootstrap().castAs<rpc::Warm>();
      if (broken_) ++tally_.reconnects;
      broken_ = false;
      return true;
    } catch (const kj::Exception& e) {
      conn_.reset();
      tally_.fatal =
          "client " + std::to_string(index_) + " cannot connect: " + e.getDescription().cStr();
      return false;
    }
  }

  // Sends one call and waits for its answer (at most call_deadline); `on_reply` sees the results
  // of an answered call. Returns the status code, or nullopt for a lost call.
  template <class P, class R, class F>
  std::optional<rpc::Status::Code> call(const char* method, capnp::Request<P, R>&& request,
                                        F&& on_reply) {
    ++tally_.requests;
    ++tally_.calls[method];
    const auto start = clock_type::now();
    try {
      kj::Promise<capnp::Response<R>> sent = request.send();
      auto response =
          io_->provider->getTimer().timeoutAfter(call_deadline, kj::mv(sent)).wait(io_->waitScope);
      ++tally_.replies;
      tally_.max_call_ms =
          std::max(tally_.max_call_ms,
                   std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
      auto code = response.getStatus().getCode();
      if (code != rpc::Status::Code::OK) {
        std::string name(rpc::code_name(code));
        if (tally_.errors_by_code[name]++ == 0)
          tally_.first_error[name] =
              std::string(method) + ": " + response.getStatus().getMessage().cStr();
      }
      on_reply(response, code);
      return code;
    } catch (const kj::Exception& e) {
      ++tally_.lost;
      std::string why =
          std::string(method) + " (client " + std::to_string(index_) + ", after " +
          std::to_string(std::chrono::duration<double>(clock_type::now() - start).count()) +
          " s): " + e.getDescription().cStr();
      if (verbose()) std::fprintf(stderr, "warm-bench soak: lost %s\n", why.c_str());
      if (tally_.lost_calls.size() < 8) tally_.lost_calls.push_back(std::move(why));
      if (e.getType() == kj::Exception::Type::DISCONNECTED) broken_ = true;
      return std::nullopt;
    }
  }

  int percent() { return std::uniform_int_distribution<int>(0, 99)(rng_); }
  const std::string& random_model() {
    return models_[std::uniform_int_distribution<std::size_t>(0, models_.size() - 1)(rng_)].id;
  }

  void step() {
    int r = percent();
    if (r < 62)
      infer();
    else if (r < 74)
      ensure_loaded();
    else if (r < 86)
      toggle_scratch();
    else
      flip_vmodel();
  }

  void infer() {
    int which = percent();
    const std::string& target = which < 75 ? random_model() : which < 90 ? vmodel_ : scratch_;
    auto req = conn_.warm.inferRequest();
    auto out = req.initRequest();
    out.setTarget(target);
    auto t = out.initInputs(1)[0];
    t.setName("input");
    t.setDtype("F32");
    auto shape = t.initShape(2);
    shape.set(0, 1);
    shape.set(1, input_width);
    auto data = t.initData(input_width * sizeof(float));
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (std::uint64_t i = 0; i < input_width; ++i) {
      float v = uniform(rng_);
      std::memcpy(data.begin() + i * sizeof(float), &v, sizeof v);
    }
    call("infer", kj::mv(req), [](auto&, rpc::Status::Code) {});
  }

  void ensure_loaded() {
    auto req = conn_.warm.ensureLoadedRequest();
    req.setId(random_model());
    bool sync = percent() < 50;
    req.setSync(sync);
    call(sync ? "ensureLoaded(sync)" : "ensureLoaded", kj::mv(req),
         [](auto&, rpc::Status::Code) {});
  }

  void toggle_scratch() {
    if (scratch_registered_) {
      auto req = conn_.warm.unregisterModelRequest();
      req.setId(scratch_);
      call("unregisterModel", kj::mv(req), [this](auto&, rpc::Status::Code code) {
        if (code == rpc::Status::Code::OK || code == rpc::Status::Code::NOT_FOUND)
          scratch_registered_ = false;
      });
    } else {
      auto req = conn_.warm.registerModelRequest();
      req.setId(scratch_);
      req.initInfo().setPath(models_[scratch_file(index_, models_.size())].id);
      req.setLoadNow(percent() < 50);
      req.setSync(percent() < 25);
      call("registerModel", kj::mv(req), [this](auto&, rpc::Status::Code code) {
        // A sync registration whose load failed is still registered.
        if (code != rpc::Status::Code::INVALID_ARGUMENT) scratch_registered_ = true;
      });
    }
  }

  void flip_vmodel() {
    const std::string& next = vmodel_target_ == target_a_ ? target_b_ : target_a_;
    auto req = conn_.warm.setVModelRequest();
    req.setId(vmodel_);
    req.setTarget(next);
    req.setAutoDeleteTarget(false);
    int cas = percent();
    if (cas < 5)
      req.setExpectedTarget(
          next);  // wrong (unless a previous flip's answer was lost): invalidArgument
    else if (cas < 25)
      req.setExpectedTarget(vmodel_target_);
    call("setVModel", kj::mv(req), [this](auto& response, rpc::Status::Code code) {
      if (code == rpc::Status::Code::OK)
        vmodel_target_ = rpc::to_std(response.getVmodel().getTarget());
    });
  }

  int index_;
  std::string socket_;
  const std::vector<soak_model>& models_;
  std::mt19937_64 rng_;
  client_tally& tally_;
  kj::AsyncIoContext* io_ = nullptr;
  connection conn_;
  bool broken_ = false;
  std::string vmodel_, scratch_, target_a_, target_b_, vmodel_target_;
  bool scratch_registered_ = false;
};

// Waits for a future of the runtime's API, at most `limit`; false when it did not come.
template <class T>
bool wait_for(std::future<T>& f, std::chrono::seconds limit) {
  return f.wait_for(limit) == std::future_status::ready;
}

// Polls inspect() until no load is queued or running, at most `limit`. False on timeout.
bool settle_loads(runtime& rt, std::chrono::seconds limit) {
  const auto until = clock_type::now() + limit;
  for (;;) {
    auto f = rt.inspect();
    if (!wait_for(f, std::chrono::seconds(10))) return false;
    auto snapshot = f.get();
    if (snapshot && snapshot->queue.empty() && snapshot->running.empty()) return true;
    if (clock_type::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::uint64_t devices_used(runtime& rt) {
  std::uint64_t used = 0;
  for (auto& d : rt.devices())
    used += d->used();
  return used;
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t i = from; i < to; ++i)
    sum += v[i];
  return to > from ? sum / static_cast<double>(to - from) : 0;
}

}  // namespace

int run_soak(const soak_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench soak: %s\n", message.c_str());
    return 1;
  };
  if (options.clients < 1) return fail("--clients must be at least 1");
  if (options.models < 2) return fail("--models must be at least 2");
  if (options.seconds <= 0) return fail("--seconds must be positive");
  if (options.failure_rate < 0 || options.failure_rate > 1)
    return fail("--failure-rate must be in [0, 1]");
  if (options.allocation_failure_rate < 0 || options.allocation_failure_rate > 1)
    return fail("--allocation-failure-rate must be in [0, 1]");

  scratch_dir dir("soak");
  const auto repo = dir.path() / "repo";

  // The models: sizes spread geometrically over [64 KiB, 2 MiB].
  std::vector<soak_model> models;
  std::uint64_t total_bytes = 0, max_bytes = 0;
  for (std::uint64_t i = 0; i < options.models; ++i) {
    double f = static_cast<double>(i) / static_cast<double>(options.models - 1);
    auto target = static_cast<std::uint64_t>(
        static_cast<double>(smallest_model) *
        std::pow(static_cast<double>(largest_model) / smallest_model, f));
    char id[32];
    std::snprintf(id, sizeof id, "m%02llu", static_cast<unsigned long long>(i));
    soak_model m{id, widths_for_bytes(target, input_width, output_width), 0};
    m.bytes = dense_data_bytes(m.widths);
    auto path = (repo / m.id / "1" / model_file_name).string();
    if (auto r = write_dense_model(path, {m.widths, activation::relu, i + 1}); !r)
      return fail(r.error().to_string());
    total_bytes += m.bytes;
    max_bytes = std::max(max_bytes, m.bytes);
    models.push_back(std::move(m));
  }
  const std::uint64_t capacity = std::max(total_bytes * 2 / 5, 2 * max_bytes);

  auto faults = std::make_shared<fault_injector>(
      fault_plan{options.failure_rate, options.allocation_failure_rate,
                 std::chrono::milliseconds(0), std::chrono::milliseconds(5)},
      options.seed);
  runtime_options ro;
  ro.devices = {"host:" + std::to_string(capacity)};
  ro.repositories = {repo.string()};
  ro.state_dir = (dir.path() / "state").string();
  ro.failure_expiry = std::chrono::milliseconds(200);
  ro.loader = std::make_shared<faulty_loader>(faults);
  ro.make_device = faulty_device_factory(faults);
  auto created = runtime::create(ro);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;
  for (auto& m : models)
    if (auto r = rt->register_model(m.id, {m.id}).get(); !r) return fail(r.error().to_string());
  for (int c = 0; c < options.clients; ++c)
    if (auto r = rt->set_vmodel(client_vmodel(c), models[vmodel_a(c, models.size())].id).get(); !r)
      return fail(r.error().to_string());

  const auto socket = (dir.path() / "warm.sock").string();
  warmd::service_options service_options;
  service_options.listen = {"unix:" + socket};
  service_options.drain_seconds = 5;
  auto service = warmd::service::start(*rt, service_options);
  if (!service) return fail("warm server: " + service.error().to_string());

  // Traffic, with the RSS sampled every second on this thread.
  std::vector<client_tally> tallies(static_cast<std::size_t>(options.clients));
  std::vector<double> rss_mb;
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(options.seconds));
  {
    std::vector<std::thread> pool;
    for (int c = 0; c < options.clients; ++c)
      pool.emplace_back([&, c] {
        soak_client client(c, socket, models, options.seed * 7919 + static_cast<std::uint64_t>(c),
                           tallies[static_cast<std::size_t>(c)]);
        client.run(deadline);
      });
    for (int k = 1;; ++k) {
      auto at = start + std::chrono::seconds(k);
      if (at > deadline) break;
      std::this_thread::sleep_until(at);
      rss_mb.push_back(static_cast<double>(rss_bytes()) / (1 << 20));
      if (verbose())
        std::fprintf(stderr, "t=%ds rss %.1f MiB used %llu\n", k, rss_mb.back(),
                     static_cast<unsigned long long>(devices_used(*rt)));
    }
    for (auto& th : pool)
      th.join();
  }
  const double traffic_seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  (*service)->stop();
  service->reset();

  // Teardown: loads settle, everything goes, the devices drain.
  std::string teardown_error;
  auto note = [&](const std::string& what) {
    if (teardown_error.empty()) teardown_error = what;
  };
  if (!settle_loads(*rt, std::chrono::seconds(30)))
    note("loads still queued or running 30 s after traffic stopped");
  inspection before{};
  if (auto f = rt->inspect(); wait_for(f, std::chrono::seconds(10)))
    if (auto snapshot = f.get()) before = std::move(*snapshot);
  for (int c = 0; c < options.clients; ++c) {
    auto f = rt->delete_vmodel(client_vmodel(c));
    if (!wait_for(f, std::chrono::seconds(30))) {
      note("delete_vmodel " + client_vmodel(c) + " unanswered");
      continue;
    }
    if (auto r = f.get(); !r)
      note("delete_vmodel " + client_vmodel(c) + ": " + r.error().to_string());
  }
  std::vector<std::string> ids;
  for (auto& m : models)
    ids.push_back(m.id);
  for (int c = 0; c < options.clients; ++c)
    ids.push_back(client_scratch(c));
  for (auto& id : ids) {
    auto f = rt->unregister_model(id);
    if (!wait_for(f, std::chrono::seconds(30))) {
      note("unregister_model " + id + " unanswered");
      continue;
    }
    if (auto r = f.get(); !r && r.error().code != errc::not_found)
      note("unregister_model " + id + ": " + r.error().to_string());
  }
  if (!settle_loads(*rt, std::chrono::seconds(30)))
    note("loads still queued or running after unregistering");
  std::uint64_t drift = devices_used(*rt);
  for (auto until = clock_type::now() + std::chrono::seconds(10);
       drift != 0 && clock_type::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    drift = devices_used(*rt);
  }
  std::uint64_t registered_after = 0, vmodels_after = 0;
  if (auto f = rt->inspect(); wait_for(f, std::chrono::seconds(10)))
    if (auto snapshot = f.get()) {
      registered_after = snapshot->registered_models;
      vmodels_after = snapshot->vmodels;
      if (drift != 0)
        for (auto& d : snapshot->devices)
          std::fprintf(stderr, "warm-bench soak: %s used %llu draining %llu resident %zu\n",
                       d.name.c_str(), static_cast<unsigned long long>(d.used),
                       static_cast<unsigned long long>(d.draining), d.resident.size());
    }

  // Totals.
  client_tally total;
  std::string fatal;
  for (auto& t : tallies) {
    total.requests += t.requests;
    total.replies += t.replies;
    total.lost += t.lost;
    total.reconnects += t.reconnects;
    total.max_call_ms = std::max(total.max_call_ms, t.max_call_ms);
    for (auto& [code, n] : t.errors_by_code)
      total.errors_by_code[code] += n;
    for (auto& [code, message] : t.first_error)
      total.first_error.emplace(code, message);
    for (auto& [method, n] : t.calls)
      total.calls[method] += n;
    for (auto& why : t.lost_calls)
      if (total.lost_calls.size() < 8) total.lost_calls.push_back(why);
    if (fatal.empty()) fatal = t.fatal;
  }
  const std::size_t q = rss_mb.size() / 4;
  double rss_first = 0, rss_last = 0, growth = 0;
  if (q > 0) {
    rss_first = mean(rss_mb, 0, q);
    rss_last = mean(rss_mb, rss_mb.size() - q, rss_mb.size());
    growth = (rss_last - rss_first) / rss_first * 100;
  }
  auto round2 = [](double v) { return std::round(v * 100) / 100; };

  nlohmann::ordered_json errors = nlohmann::ordered_json::object();
  for (auto& [code, n] : total.errors_by_code)
    errors[code] = n;
  nlohmann::ordered_json calls = nlohmann::ordered_json::object();
  for (auto& [method, n] : total.calls)
    calls[method] = n;
  std::uint64_t evictions = 0;
  for (auto& d : before.devices)
    evictions += d.evictions;
  nlohmann::ordered_json out{
      {"scenario", "soak"},
      {"seconds", options.seconds},
      {"clients", options.clients},
      {"requests", total.requests},
      {"replies", total.replies},
      {"lost", total.lost},
      {"errors_by_code", errors},
      {"loads_failed_injected", faults->loads_failed()},
      {"allocations_failed_injected", faults->allocations_failed()},
      {"accounting_drift_bytes", drift},
      {"rss_first_quarter_mb", round2(rss_first)},
      {"rss_last_quarter_mb", round2(rss_last)},
      {"rss_growth_pct", round2(growth)},
      {"models", options.models},
      {"failure_rate", options.failure_rate},
      {"device_bytes", capacity},
      {"model_bytes", total_bytes},
      {"requests_per_s", round2(static_cast<double>(total.requests) / traffic_seconds)},
      {"max_call_ms", round2(total.max_call_ms)},
      {"calls", calls},
      {"loads_started", before.loads_started},
      {"loads_failed", before.loads_failed},
      {"evictions", evictions},
      {"reconnects", total.reconnects}};
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);

  if (verbose())
    for (auto& [code, message] : total.first_error)
      std::fprintf(stderr, "warm-bench soak: first %s: %s\n", code.c_str(), message.c_str());
  for (auto& why : total.lost_calls)
    std::fprintf(stderr, "warm-bench soak: lost %s\n", why.c_str());
  int rc = 0;
  if (auto it = total.first_error.find("internal"); it != total.first_error.end())
    rc = fail("an internal error (a bug in warm): " + it->second);
  if (!fatal.empty()) rc = fail(fatal);
  if (!teardown_error.empty()) rc = fail("teardown: " + teardown_error);
  if (registered_after != 0 || vmodels_after != 0)
    rc = fail(std::to_string(registered_after) + " models and " + std::to_string(vmodels_after) +
              " vmodels still registered after the teardown");
  if (total.lost > 0) rc = fail(std::to_string(total.lost) + " calls lost");
  if (drift != 0) rc = fail("device accounting drifted by " + std::to_string(drift) + " bytes");
  if (q == 0) rc = fail("too few RSS samples for quarters (run at least 4 s)");
  if (growth >= 5) rc = fail("RSS grew " + std::to_string(growth) + "% (the target is < 5%)");
  rt.reset();
  return rc;
}

}  // namespace warm::bench
