// Where model weights are freed: never on a thread that runs actors (common/actor_threads.hpp).
// Freeing unmaps memory, frees device memory or waits for a model runtime's answer; on a scheduler
// thread it would stall every actor the thread serves. The runtime marks the actor system's
// threads, and a resident model's destructor counts a freeing on one.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "common/actor_threads.hpp"
#include "support/runtime_fixture.hpp"

using namespace warm;
using namespace std::chrono_literals;

namespace {

bool device_empty(runtime& rt) {
  for (auto& d : rt.devices())
    if (d->used() != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("a freeing is counted on a thread marked as running actors, and only there") {
  const auto before = actor_threads::weights_freed();
  actor_threads::note_weights_freed();  // this thread runs no actors
  CHECK(actor_threads::weights_freed() == before);
  std::thread marked([] {
    actor_threads::enter();
    CHECK(actor_threads::current());
    actor_threads::note_weights_freed();
    actor_threads::leave();
    CHECK_FALSE(actor_threads::current());
    actor_threads::note_weights_freed();
  });
  marked.join();
  CHECK(actor_threads::weights_freed() == before + 1);
  CHECK_FALSE(actor_threads::current());
}

TEST_CASE("the weights of a load cancelled while it ran are freed off the actors' threads") {
  test::runtime_fixture f({"a"});
  const auto before = actor_threads::weights_freed();
  f.loader->hold();
  f.register_all(true);  // a background load, which no request waits for
  REQUIRE(test::eventually([&] { return f.loader->loads_of("a") == 1; }));
  REQUIRE(f.rt->unregister_model("a").get());  // cancels it: its weights come back to be dropped
  f.loader->open_gate();
  REQUIRE(test::eventually([&] { return device_empty(*f.rt); }));
  CHECK(actor_threads::weights_freed() == before);
  // The device takes the next load once the dropped bytes are back (device_freed unblocks it).
  f.register_all();
  auto r = f.rt->infer({"a", {test::input()}}).get();
  CHECK(r);
}

TEST_CASE(
    "a load cancelled while it ran that then fails leaves nothing to free, and the pool goes on") {
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 1);  // one load at a time
  const auto before = actor_threads::weights_freed();
  f.loader->hold();
  f.loader->fail("a");  // a's load will fail: no weights come back
  REQUIRE(f.rt->register_model("a", {"a"}, true).get());
  REQUIRE(test::eventually([&] { return f.loader->loads_of("a") == 1; }));
  REQUIRE(f.rt->unregister_model("a").get());  // cancelled while it runs
  f.loader->open_gate();
  // b's load starts only once the pool has taken a's failed, cancelled answer (one load at a
  // time): the pool had nothing to drop and serves on.
  REQUIRE(f.rt->register_model("b", {"b"}).get());
  auto r = f.rt->infer({"b", {test::input()}}).get();
  CHECK(r);
  CHECK(f.loader->started() == std::vector<std::string>{"a", "b"});
  CHECK(actor_threads::weights_freed() == before);
}

TEST_CASE("weights evicted, unloaded and unregistered are freed off the actors' threads") {
  test::runtime_fixture f({"a", "b", "c"}, {"host:" + std::to_string(2 * test::small_model_bytes)});
  f.register_all();
  const auto before = actor_threads::weights_freed();
  for (int round = 0; round < 3; ++round)
    for (auto& m : f.names)
      REQUIRE(f.rt->infer({m, {test::input()}}).get());  // evicts as it goes
  REQUIRE(f.rt->unload("c").get());
  for (auto& m : f.names)
    REQUIRE(f.rt->unregister_model(m).get());
  REQUIRE(test::eventually([&] { return device_empty(*f.rt); }));
  CHECK(actor_threads::weights_freed() == before);
}
