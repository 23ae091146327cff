// Room before a load, LRU victims, busy models never evicted, and quiescing: the device actor
// driven through warm::runtime. Leases are held through the registry's use_model message, the
// way an in-flight inference holds one.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/protocol/registry_protocol.hpp"
#include "gpu/host_device.hpp"
#include "runtime/runtime_actors.hpp"
#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;
using warm::test::small_model_bytes;

namespace {

// Room for exactly two small models.
const std::string two_models = "host:" + std::to_string(2 * small_model_bytes + 100);

// Holds a lease on `id` (loading it if needed) until the returned object is destroyed.
std::shared_ptr<acquired> hold(runtime& rt, const std::string& id) {
  auto promise = std::make_shared<std::promise<expected<acquired>>>();
  auto future = promise->get_future();
  caf::anon_send(actors_of(rt).registry,
                 msg::use_model{id, use_kind::wait, {}, [promise](expected<acquired> a) {
                                  promise->set_value(std::move(a));
                                }});
  auto a = future.get();
  REQUIRE(a);
  return std::make_shared<acquired>(std::move(*a));
}

std::vector<std::string> resident(runtime& rt) {
  std::vector<std::string> out;
  auto snapshot = rt.inspect().get();
  for (auto& r : snapshot->devices.at(0).resident)
    out.push_back(r.model);
  std::sort(out.begin(), out.end());
  return out;
}

bool infer_ok(runtime& rt, const std::string& id) {
  return rt.infer({id, {test::input()}}).get().has_value();
}

}  // namespace

TEST_CASE("a load evicts the least recently used model to make room") {
  test::runtime_fixture f({"a", "b", "c"}, {two_models});
  f.register_all();
  REQUIRE(infer_ok(*f.rt, "a"));
  f.time->advance(1s);
  REQUIRE(infer_ok(*f.rt, "b"));
  f.time->advance(1s);
  REQUIRE(infer_ok(*f.rt, "a"));  // a hit: b is now the least recently used
  f.time->advance(1s);
  REQUIRE(infer_ok(*f.rt, "c"));
  CHECK(resident(*f.rt) == std::vector<std::string>{"a", "c"});
  CHECK(test::state_of(*f.rt, "b") == model_state::not_loaded);
  auto dev = f.rt->inspect().get()->devices.at(0);
  CHECK(dev.used == 2 * small_model_bytes);
  CHECK(dev.evictions == 1);
  REQUIRE(infer_ok(*f.rt, "b"));  // it comes back on demand, evicting a (used at 2 s; c at 3 s)
  CHECK(resident(*f.rt) == std::vector<std::string>{"b", "c"});
}

TEST_CASE("a model with an inference in flight is never a victim; a load waits until room frees") {
  test::runtime_fixture f({"a", "b", "c", "d"}, {two_models});
  f.register_all();
  auto lease_a = hold(*f.rt, "a");
  f.time->advance(1s);
  REQUIRE(infer_ok(*f.rt, "b"));
  f.time->advance(1s);
  // a is least recently used but busy: c must evict b.
  auto lease_c = hold(*f.rt, "c");
  CHECK(resident(*f.rt) == std::vector<std::string>{"a", "c"});

  // Both residents busy: d waits in the queue and nothing is over-committed.
  auto d = f.rt->infer({"d", {test::input()}});
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "d") == model_state::queued; }));
  CHECK(d.wait_for(50ms) == std::future_status::timeout);
  auto snapshot = f.rt->inspect().get();
  CHECK(snapshot->queue.size() == 1);
  CHECK(snapshot->devices[0].used <= snapshot->devices[0].capacity);

  lease_a.reset();  // a's inference ends: it becomes a victim and d loads
  auto result = d.get();
  REQUIRE(result);
  CHECK_FALSE(result->cache_hit);
  CHECK(resident(*f.rt) == std::vector<std::string>{"c", "d"});
  lease_c.reset();
}

TEST_CASE("unregistering waits for in-flight inferences before the bytes return") {
  test::runtime_fixture f({"a"}, {two_models});
  f.register_all();
  auto lease = hold(*f.rt, "a");
  REQUIRE(f.rt->unregister_model("a").get());
  REQUIRE(eventually([&] { return resident(*f.rt).empty(); }));
  auto dev = f.rt->inspect().get()->devices.at(0);
  CHECK(dev.used == small_model_bytes);  // still held by the lease
  CHECK(dev.draining == small_model_bytes);
  CHECK(input_width(lease->lease.model().io()) == 16);  // the weights are still there to use
  lease.reset();
  // The bytes come back on the reclaimer, then its quiesced event reaches the device actor, which
  // stops counting them as draining: both, in that order, a moment apart.
  REQUIRE(eventually([&] {
    auto d = f.rt->inspect().get()->devices.at(0);
    return d.used == 0 && d.draining == 0;
  }));
  auto st = f.rt->status("a").get();
  CHECK(st->state == model_state::not_found);
}

TEST_CASE("a request arriving while an unloaded model drains is served by a new load, not lost") {
  test::runtime_fixture f({"a"}, {two_models});
  f.register_all();
  auto lease = hold(*f.rt, "a");  // an inference in flight
  REQUIRE(f.rt->unload("a").get());
  REQUIRE(eventually(
      [&] { return f.rt->inspect().get()->devices.at(0).draining == small_model_bytes; }));

  auto served = f.rt->infer({"a", {test::input()}}).get();  // while the old copy drains
  REQUIRE(served);
  CHECK_FALSE(served->cache_hit);
  CHECK(f.loader->loads_of("a") == 2);
  auto dev = f.rt->inspect().get()->devices.at(0);
  CHECK(dev.used == 2 * small_model_bytes);  // the draining copy and the new one, both charged
  CHECK(input_width(lease->lease.model().io()) == 16);  // the old copy still serves its lease

  lease.reset();            // the in-flight inference ends: only now do the old copy's bytes return
  REQUIRE(eventually([&] {  // the bytes back, then the device told (as above)
    auto d = f.rt->inspect().get()->devices.at(0);
    return d.used == small_model_bytes && d.draining == 0;
  }));
  CHECK(resident(*f.rt) == std::vector<std::string>{"a"});
}

TEST_CASE("requests for an evicted model reload it and none is lost") {
  test::runtime_fixture f({"a", "b", "c"}, {"host:" + std::to_string(small_model_bytes + 100)}, 1);
  f.register_all();
  REQUIRE(infer_ok(*f.rt, "a"));
  // Interleave requests for three models on a device that holds one: every request is answered.
  std::atomic<int> answered{0}, ok{0};
  for (int round = 0; round < 50; ++round)
    for (const char* id : {"b", "a", "c"})
      f.rt->infer({id, {test::input()}}, [&](expected<infer_result> r) {
        ok += r.has_value();
        ++answered;
      });
  REQUIRE(eventually([&] { return answered == 150; }));
  CHECK(ok == 150);
  auto snapshot = f.rt->inspect().get();
  CHECK(snapshot->devices[0].resident.size() == 1);
  CHECK(snapshot->devices[0].used == small_model_bytes);
}

TEST_CASE("a model larger than every device fails at once with model_too_large") {
  test::runtime_fixture f({"a"}, {"host:300"});
  f.register_all();
  auto r = f.rt->infer({"a", {test::input()}}).get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::model_too_large);
  CHECK(f.loader->loads_of("a") == 0);
  auto st = f.rt->status("a").get();
  CHECK(st->state == model_state::loading_failed);
}

TEST_CASE("device accounting returns to zero after everything is unregistered") {
  test::runtime_fixture f({"a", "b", "c"},
                          {two_models, "host.1:" + std::to_string(small_model_bytes + 10)});
  f.register_all();
  for (int i = 0; i < 5; ++i)
    for (auto& m : f.names)
      REQUIRE(infer_ok(*f.rt, m));
  for (auto& m : f.names)
    REQUIRE(f.rt->unregister_model(m).get());
  REQUIRE(eventually([&] {
    for (auto& d : f.rt->devices())
      if (d->used() != 0) return false;
    return true;
  }));
}

TEST_CASE(
    "under a storm of requests over more models than fit, every load gets room and every request "
    "an answer") {
  // A refused reservation must leave the pool a wake-up even when the busy model that blocked it
  // turns idle between the victim choice and the device's next look. A replay at 600 requests/s
  // stalled on that window; here, with tiny models, the window is too short to hit reliably, so
  // this is a stress test of the same path rather than a reproduction.
  test::runtime_fixture f({"a", "b", "c", "d"}, {"host:1200B"});  // two of the 544-byte models fit
  f.register_all();
  constexpr int threads = 4, per_thread = 400;
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t)
    clients.emplace_back([&, t] {
      std::uint64_t x = 88172645463325252ull + t;
      for (int i = 0; i < per_thread; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift: a skewed mix of the four models
        const char* model = (x % 8 < 4) ? "a" : (x % 8 < 6) ? "b" : (x % 8 < 7) ? "c" : "d";
        f.rt->infer({model, {test::input()}}, [&](expected<infer_result> r) {
          if (!r) failed.fetch_add(1);
          answered.fetch_add(1);
        });
      }
    });
  for (auto& c : clients)
    c.join();
  REQUIRE(eventually([&] { return answered.load() == threads * per_thread; },
                     std::chrono::seconds(60)));
  CHECK(failed.load() == 0);
}

// Freeing an evicted model's memory can take long (munmap of gigabytes, cudaFree). It happens on
// the runtime's reclaimer, never in the device actor's handler: while a free is stuck, the device
// actor still answers, counts the evicted bytes as draining, and the waiting load proceeds once
// the bytes are back.
TEST_CASE("a slow free of evicted weights never blocks the device actor") {
  struct gate_state {
    std::mutex mutex;
    std::condition_variable opened;
    bool closed = false;
    int waiting = 0;
  };
  auto gate = std::make_shared<gate_state>();
  auto open_gate = [gate] {
    std::lock_guard<std::mutex> lock(gate->mutex);
    gate->closed = false;
    gate->opened.notify_all();
  };
  auto one_model = "host:" + std::to_string(small_model_bytes + 100);
  test::runtime_fixture f({"a", "b"}, {one_model}, 2, [gate](runtime_options& o) {
    o.make_device = [gate](const device_spec& spec) -> expected<std::unique_ptr<device>> {
      host_device_hooks hooks;
      hooks.before_free = [gate] {
        std::unique_lock<std::mutex> lock(gate->mutex);
        ++gate->waiting;
        gate->opened.wait(lock, [&] { return !gate->closed; });
        --gate->waiting;
      };
      return make_host_device(*spec.capacity, "host", std::move(hooks));
    };
  });
  f.register_all();
  REQUIRE(infer_ok(*f.rt, "a"));
  {
    std::lock_guard<std::mutex> lock(gate->mutex);
    gate->closed = true;
  }
  struct opener {
    std::function<void()> open;
    ~opener() { open(); }  // never leave a free stuck, whatever fails below
  } guard{open_gate};

  auto b = f.rt->infer({"b", {test::input()}});  // evicts a, whose free now sticks
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> lock(gate->mutex);
    return gate->waiting == 1;
  }));
  auto snapshot = f.rt->inspect();
  REQUIRE(snapshot.wait_for(5s) ==
          std::future_status::ready);  // the device actor is not the one stuck
  auto inspected = snapshot.get();
  REQUIRE(inspected);
  CHECK(inspected->devices.at(0).draining == small_model_bytes);
  CHECK(inspected->devices.at(0).resident.empty());
  CHECK(b.wait_for(50ms) == std::future_status::timeout);  // no room until the bytes are back

  open_gate();
  REQUIRE(b.wait_for(10s) == std::future_status::ready);
  CHECK(b.get());
  CHECK(resident(*f.rt) == std::vector<std::string>{"b"});
  CHECK(eventually([&] { return f.rt->inspect().get()->devices.at(0).draining == 0; }));
}
