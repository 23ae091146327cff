// The copy scaler actor (src/cluster/copy_scaler.hpp) over an in-memory etcd, scripted peers, a
// fixed view of the members and a scripted inspection: when copies are added and where, what is
// written to etcd, and when the copy here is dropped.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <mutex>

#include "cluster/copy_scaler.hpp"
#include "cluster/records.hpp"
#include "support/cluster_fakes.hpp"
#include "support/runtime_fixture.hpp"

using namespace warm;
using namespace warm::cluster;
using warm::test::instance;

namespace {

const std::string root = "/warm/test/";

struct scaler_rig {
  scaler_rig(std::vector<member> members, copy_rule rule) : members(std::move(members)) {
    copy_scaler_config c;
    c.rule = rule;
    c.tick = std::chrono::milliseconds(10);
    c.claims.store = &store;
    c.claims.root = root;
    c.claims.instance = "a";
    c.claims.counters = &counters;
    c.members = &this->members;
    c.peers = &peers;
    c.inspect = [this](callback<inspection> done) {
      ++inspections;
      inspection s;
      s.devices.emplace_back();
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [model, queued] : queueing) {
        resident_info r;
        r.model = model;
        r.bytes = 544;
        r.in_flight = queued;
        s.devices[0].resident.push_back(r);
      }
      done(std::move(s));
    };
    c.unload = [this](const std::string& model, callback<void> done) {
      std::lock_guard<std::mutex> lock(mutex);
      unloaded.push_back(model);
      done({});
    };
    auto spawned = spawn_copy_scaler(system, std::move(c));
    REQUIRE(spawned);
    scaler = *spawned;
  }
  ~scaler_rig() {
    caf::anon_send(scaler, cluster::msg::stop_scaling{});
    caf::scoped_actor self{system};
    self->wait_for(scaler);
  }
  void set_queueing(const std::string& model, std::uint32_t queued) {
    std::lock_guard<std::mutex> lock(mutex);
    queueing[model] = queued;
  }
  std::vector<std::string> unloads() {
    std::lock_guard<std::mutex> lock(mutex);
    return unloaded;
  }

  caf::actor_system_config config;
  caf::actor_system system{config};
  test::fake_store store;
  test::fake_peers peers;
  test::fake_members members;
  cluster_counters counters;
  std::mutex mutex;
  std::map<std::string, std::uint32_t> queueing;  // resident models, requests in flight
  std::vector<std::string> unloaded;
  std::atomic<int> inspections{0};
  copy_scaler_actor scaler;
};

copy_rule quick_rule() {
  copy_rule r;
  r.add_queue = 2;
  r.sustain_ms = 100;
  r.cool_ms = 200;
  r.settle_ms = 60'000;
  return r;
}

}  // namespace

TEST_CASE("a model queueing past add_queue gets copies elsewhere, with one change of copies") {
  scaler_rig rig({instance("a", 1'000'000, 1000, true, {"m"}), instance("b", 1'000'000, 0),
                  instance("c", 1'000'000, 0), instance("d", 1'000'000, 0)},
                 quick_rule());
  rig.set_queueing("m", 3);  // 3 per copy ≥ 2: more copies, at most doubling them at a time
  REQUIRE(test::eventually([&] { return rig.counters.copies_added > 0; }));
  auto ensured = rig.peers.ensured();
  REQUIRE(ensured.size() == 1);
  CHECK(ensured[0].model == "m");
  CHECK(ensured[0].address != "unix:/run/a");
  auto change = rig.store.key(copies_key(root, "m"));
  REQUIRE(change);
  auto decoded = decode_copies(change->key, change->value);
  REQUIRE(decoded);
  CHECK(decoded->copies == 2);
  CHECK(decoded->by == "a");
  CHECK(change->lease == 77);
  // Within the settle time nothing more is asked for, however long it queues.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rig.peers.ensured().size() == 1);
}

TEST_CASE("a model queueing below add_queue gets no copy") {
  scaler_rig rig({instance("a", 1'000'000, 1000, true, {"m"}), instance("b", 1'000'000, 0)},
                 quick_rule());
  rig.set_queueing("m", 1);
  REQUIRE(test::eventually([&] { return rig.inspections > 30; }));  // well past sustain_ms
  CHECK(rig.peers.ensured().empty());
  CHECK_FALSE(rig.store.key(copies_key(root, "m")));
}

TEST_CASE("another holder's change of copies since the read wins: nothing is placed") {
  scaler_rig rig({instance("a", 1'000'000, 1000, true, {"m"}), instance("b", 1'000'000, 0)},
                 quick_rule());
  // Between the scaler's read of m's copies and its claim, another holder changes them.
  rig.store.on_next_transaction([](test::fake_store& store) {
    auto written =
        store.put(copies_key(root, "m"), encode(copies_change{2, "b", now_unix_ms()}), 0);
    (void)written;  // checked below: b's change is what stands
  });
  rig.set_queueing("m", 4);
  REQUIRE(test::eventually([&] { return rig.store.transactions() > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rig.peers.ensured().empty());
  CHECK_FALSE(rig.store.key(claim_key(root, "m")));
  auto change = rig.store.key(copies_key(root, "m"));
  REQUIRE(change);
  auto decoded = decode_copies(change->key, change->value);
  REQUIRE(decoded);
  CHECK(decoded->by == "b");  // its change stands, and settles m for settle_ms
  CHECK(rig.counters.copies_added == 0);
}

TEST_CASE(
    "a change of copies within the settle time, read from etcd, holds the copies as they are") {
  scaler_rig rig({instance("a", 1'000'000, 1000, true, {"m"}), instance("b", 1'000'000, 0)},
                 quick_rule());
  REQUIRE(rig.store.put(copies_key(root, "m"), encode(copies_change{1, "b", now_unix_ms()}), 0));
  rig.set_queueing("m", 4);
  REQUIRE(test::eventually([&] { return rig.store.lookups() > 0; }));  // judged: read m's copies
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rig.peers.ensured().empty());
  CHECK(rig.store.transactions() == 0);
}

TEST_CASE("a full cluster drops the copy here of a model that cooled") {
  auto rule = quick_rule();
  rule.settle_ms = 100;
  // Every instance full; b holds m too (two copies).
  scaler_rig rig({instance("a", 1000, 1000, true, {"m"}), instance("b", 1000, 1000, false, {"m"})},
                 rule);
  rig.set_queueing("m", 0);
  REQUIRE(test::eventually([&] { return !rig.unloads().empty(); }));
  CHECK(rig.unloads() == std::vector<std::string>{"m"});
  CHECK(rig.counters.copies_dropped == 1);
  auto change = rig.store.key(copies_key(root, "m"));
  REQUIRE(change);
  auto decoded = decode_copies(change->key, change->value);
  REQUIRE(decoded);
  CHECK(decoded->copies == 1);
}
