// The placer actor (src/cluster/placer.hpp) over an in-memory etcd, scripted peers and a fixed
// view of the members, with a real runtime as this instance: where misses go, what is written to
// etcd, and how it stops.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <future>

#include "cluster/placer.hpp"
#include "cluster/records.hpp"
#include "runtime/runtime_actors.hpp"
#include "support/cluster_fakes.hpp"
#include "support/runtime_fixture.hpp"

using namespace warm;
using namespace warm::cluster;
using warm::test::instance;

namespace {

const std::string root = "/warm/test/";

// A runtime "a" holding models m and x (registered, not loaded), a placer over fakes.
struct placer_rig {
  explicit placer_rig(std::vector<member> members) : members(std::move(members)) {
    fixture.register_all();
    placer_config c;
    c.claims.store = &store;
    c.claims.root = root;
    c.claims.instance = "a";
    c.claims.counters = &counters;
    c.rt = fixture.rt.get();
    c.members = &this->members;
    c.peers = &peers;
    auto spawned = spawn_placer(*actors_of(*fixture.rt).system, std::move(c));
    REQUIRE(spawned);
    placer = *spawned;
  }
  ~placer_rig() { stop(); }

  void stop() {
    if (!placer) return;
    store.release();
    caf::anon_send(placer, cluster::msg::stop_placing{});
    caf::scoped_actor self{*actors_of(*fixture.rt).system};
    self->wait_for(placer);
    placer = nullptr;
  }

  // Sends a miss for `model`; the future has its answer.
  std::future<expected<infer_result>> miss(const std::string& model) {
    auto answer = std::make_shared<std::promise<expected<infer_result>>>();
    auto f = answer->get_future();
    infer_request r{model, {test::input()}};
    caf::anon_send(placer, cluster::msg::place_miss{
                               model, std::move(r),
                               once_callback<infer_result>([answer](expected<infer_result> x) {
                                 answer->set_value(std::move(x));
                               })});
    return f;
  }

  test::runtime_fixture fixture{{"m", "x"}};
  test::fake_store store;
  test::fake_peers peers;
  test::fake_members members;
  cluster_counters counters;
  placer_actor placer;
};

expected<infer_result> answer(std::future<expected<infer_result>>& f) {
  REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  return f.get();
}

// "a" is full, "b" has room: placement chooses b.
std::vector<member> a_full_b_empty() {
  return {instance("a", 1000, 1000, true), instance("b", 1'000'000, 0)};
}

}  // namespace

TEST_CASE("misses that arrive while the placer decides are placed together: one read, one claim") {
  placer_rig rig(a_full_b_empty());
  rig.store.hold();
  auto first = rig.miss("x");  // its decision waits on etcd
  REQUIRE(rig.store.wait_waiting());
  std::vector<std::future<expected<infer_result>>> answers;
  for (int i = 0; i < 3; ++i)
    answers.push_back(rig.miss("m"));
  const auto reads = rig.store.reads(), transactions = rig.store.transactions();
  rig.store.release();
  REQUIRE(answer(first));
  for (auto& f : answers) {
    auto r = answer(f);
    REQUIRE(r);
    CHECK(r->model == "peer unix:/run/b");
  }
  // x's decision (one read, one claim), then m's three misses together (one read, one claim).
  CHECK(rig.store.reads() - reads == 2);
  CHECK(rig.store.transactions() - transactions == 2);
  CHECK(rig.counters.placements == 2);
  auto claim = rig.store.key(claim_key(root, "m"));
  REQUIRE(claim);
  auto decoded = decode_claim(claim->key, claim->value);
  REQUIRE(decoded);
  CHECK(decoded->instance == "b");
  CHECK(claim->lease == 77);  // on this instance's lease
  int to_b = 0;
  for (const auto& c : rig.peers.inferred())
    to_b += c.address == "unix:/run/b" && c.model == "m";
  CHECK(to_b == 3);
}

TEST_CASE("a request whose load fails where it was placed is placed again without that instance") {
  std::vector<member> members{instance("a", 1000, 1000, true), instance("b", 1'000'000, 0),
                              instance("c", 100'000, 0)};
  placer_rig rig(members);
  rig.peers.answer_infer("unix:/run/b", [](const infer_request&) -> expected<infer_result> {
    return make_error(errc::load_failed, "b cannot load it");
  });
  auto f = rig.miss("m");
  auto r = answer(f);
  REQUIRE(r);
  CHECK(r->model == "peer unix:/run/c");
  // Recorded for every instance, on this instance's lease.
  auto failure = rig.store.key(failure_key(root, "m", "b"));
  REQUIRE(failure);
  CHECK(failure->lease == 77);
  auto inferred = rig.peers.inferred();
  REQUIRE(inferred.size() == 2);
  CHECK(inferred[0].address == "unix:/run/b");
  CHECK(inferred[1].address == "unix:/run/c");

  SECTION("placed again once only: a second failure is the answer") {
    rig.peers.answer_infer("unix:/run/c", [](const infer_request&) -> expected<infer_result> {
      return make_error(errc::capacity_exhausted, "c is full");
    });
    auto again = rig.miss("x");
    auto second = answer(again);
    REQUIRE_FALSE(second);
    CHECK(second.error().code == errc::capacity_exhausted);
    CHECK(rig.peers.inferred().size() == 4);  // x: b (failed), then c (failed); no third try
  }
}

TEST_CASE("etcd unreachable: the miss is served here, as a warmd alone would") {
  placer_rig rig(a_full_b_empty());
  rig.store.set_down(true);
  auto f = rig.miss("m");
  auto r = answer(f);
  REQUIRE(r);
  CHECK(r->model == "m");  // the runtime's answer
  CHECK(rig.peers.inferred().empty());
  CHECK(rig.fixture.loader->loads_of("m") == 1);
}

TEST_CASE("stop_placing serves what is queued here and answers every miss once") {
  placer_rig rig(a_full_b_empty());
  rig.store.hold();
  auto first = rig.miss("x");
  REQUIRE(rig.store.wait_waiting());
  auto a = rig.miss("m"), b = rig.miss("m");
  caf::anon_send(rig.placer, cluster::msg::stop_placing{});
  rig.store.release();
  REQUIRE(answer(first));
  for (auto* f : {&a, &b}) {
    auto r = answer(*f);
    REQUIRE(r);
    CHECK(r->model == "m");  // served here, not forwarded
  }
  for (const auto& c : rig.peers.inferred())
    CHECK(c.model != "m");
  rig.stop();
}

TEST_CASE("a load that fails here is recorded in etcd for the other instances") {
  placer_rig rig(a_full_b_empty());
  rig.fixture.loader->fail("m");
  auto loaded = rig.fixture.rt->ensure_loaded("m", true);
  REQUIRE(loaded.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  REQUIRE_FALSE(loaded.get());
  REQUIRE(test::eventually([&] { return rig.store.key(failure_key(root, "m", "a")).has_value(); }));
  CHECK(rig.store.key(failure_key(root, "m", "a"))->lease == 77);
}

TEST_CASE("hot models of an instance that went are loaded by the adopter, before any request") {
  // "a" (this instance) is the live instance with the lowest name, and has room.
  placer_rig rig({instance("a", 1'000'000, 0, true), instance("b", 1000, 1000)});
  caf::anon_send(rig.placer, cluster::msg::instance_gone{{"m"}});
  REQUIRE(test::eventually(
      [&] { return test::state_of(*rig.fixture.rt, "m") == model_state::loaded; }));
  CHECK(rig.counters.adopted == 1);
  CHECK(rig.store.key(claim_key(root, "m")).has_value());

  SECTION("an instance that is not the adopter leaves it to the one that is") {
    rig.members.set({instance("0", 1'000'000, 0), instance("a", 1'000'000, 0, true)});
    caf::anon_send(rig.placer, cluster::msg::instance_gone{{"x"}});
    auto f = rig.miss("x");  // answered after instance_gone was handled
    REQUIRE(answer(f));
    CHECK(rig.counters.adopted == 1);
  }
}
