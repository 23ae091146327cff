// The loader pool actor alone, on CAF's deterministic test coordinator: the test decides which
// actor handles its next message, so an ordering bug in the pool shows up every run instead of
// behind polling and timing. The pool's devices and model actors are fakes that record what the
// pool asks of them; every reservation is refused, so no load reaches a worker and the order in
// which the pool asks for reservations is the order in which its queue hands out loads.
#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/loader_pool.hpp"
#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "gpu/host_device.hpp"

using namespace std::chrono_literals;
using namespace warm;

namespace {

// What the fakes saw, in order. Everything runs on the test's thread (the coordinator's jobs).
struct seen {
  std::vector<std::string> reserves;  // models the device was asked to reserve for
  std::vector<std::string> outcomes;  // "owner: failed" / "owner: cancelled" / "owner: started"
};

// The fakes are typed: each takes its actor's whole interface, so a message added to an
// interface must be thought about here (the compiler says so), and what the pool should never
// send a fake is recorded as "unexpected" and fails the test.

// A device actor that refuses every reservation with a final error (not capacity_exhausted, so
// the pool fails the load and moves on to the next one in its queue).
device_actor::behavior_type refusing_device(device_actor::pointer, std::shared_ptr<seen> log) {
  auto unexpected = [log](const char* what) {
    log->outcomes.push_back(std::string("unexpected: ") + what);
  };
  return {
      [=](msg::reserve& m) {
        log->reserves.push_back(m.model);
        msg::reserve_result r;
        r.error = make_error(errc::load_failed, m.model + ": refused by the test");
        return r;
      },
      [=](msg::install&) { unexpected("install"); },
      [=](msg::withdraw_slot&) { unexpected("withdraw_slot"); },
      [=](msg::slot_released&) { unexpected("slot_released"); },
      [=](msg::device_changed&) { unexpected("device_changed"); },
      [=](msg::collect_scores&) -> caf::result<msg::scores_collected> {
        unexpected("collect_scores");
        return to_caf_error(make_error(errc::invalid_argument, "no scores here"));
      },
      [=](msg::swap_scores&) { unexpected("swap_scores"); },
      [=](msg::inspect_device&) { unexpected("inspect_device"); },
      [=](msg::pin_model&) { unexpected("pin_model"); },
  };
}

// A model actor that only records what the pool tells it.
model_actor::behavior_type recording_owner(model_actor::pointer, std::shared_ptr<seen> log,
                                           std::string name) {
  auto unexpected = [log](const char* what) {
    log->outcomes.push_back(std::string("unexpected: ") + what);
  };
  return {
      [=](msg::load_started&) { log->outcomes.push_back(name + ": started"); },
      [=](msg::load_failed&) { log->outcomes.push_back(name + ": failed"); },
      [=](msg::load_cancelled&) { log->outcomes.push_back(name + ": cancelled"); },
      [=](msg::load_done&) { log->outcomes.push_back(name + ": done"); },
      [=](msg::model_use&) -> caf::result<msg::granted> {
        unexpected("model_use");
        return msg::granted{};
      },
      [=](msg::client_use&) { unexpected("client_use"); },
      [=](msg::model_status_request&) -> caf::result<model_status> {
        unexpected("model_status_request");
        return model_status{};
      },
      [=](msg::unload_loaded&) -> caf::result<void> {
        unexpected("unload_loaded");
        return caf::unit;
      },
      [=](msg::slot_evicted&) { unexpected("slot_evicted"); },
      [=](msg::model_unregister&) { unexpected("model_unregister"); },
      [=](msg::forget_failure&) -> caf::result<void> {
        unexpected("forget_failure");
        return caf::unit;
      },
      [=](msg::file_checked&) { unexpected("file_checked"); },
  };
}

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<seen> log = std::make_shared<seen>();
  std::shared_ptr<manual_clock> time = std::make_shared<manual_clock>();
  loader_pool_actor pool;
  device_actor device;
  std::vector<model_actor> owners;

  fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    loader_pool_config config;
    config.devices.push_back(make_host_device(1 << 30));
    config.time = time;
    config.max_concurrent_loads = 1;    // one load at a time: the rest wait in the queue
    config.reclaim = inline_reclaim();  // no weights are loaded here
    pool = spawn_loader_pool(*sys, std::move(config));
    device = sys->spawn(refusing_device, log);
    attach_devices(pool, {device});
    sched->run();  // every actor initialised, the devices attached; nothing else to do
  }

  ~fixture() {
    caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);  // its workers are linked to it
    caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
    for (auto& o : owners)
      caf::anon_send_exit(o, caf::exit_reason::user_shutdown);
    sched->run();
  }

  // A model actor (fake) for registration {model, generation}.
  msg::registration owner(const std::string& model, std::uint64_t generation, model_actor* handle) {
    auto name = model + "#" + std::to_string(generation);
    owners.push_back(sys->spawn(recording_owner, log, name));
    sched->run();
    *handle = owners.back();
    return {model, generation};
  }

  // Sends the pool an enqueue_load of `who` (1 MiB; `waiting`: a request waits on it) and lets
  // the pool handle it, and only it; the clock then moves on 1 ms.
  void enqueue(const msg::registration& who, const model_actor& handle, bool waiting) {
    msg::enqueue_load m;
    m.who = who;
    m.owner = handle;
    m.bytes = 1 << 20;
    m.waiting = waiting;
    m.when = time->now();
    m.waiters = waiting ? 1 : 0;
    caf::anon_send(pool, std::move(m));
    pool_handles_one();
    time->advance(1ms);
  }

  // Runs the pool's next message only (the device's and owners' mailboxes wait).
  void pool_handles_one() {
    REQUIRE(sched->prioritize(pool));
    sched->run_once();
  }
};

}  // namespace

TEST_CASE("a load that requests wait for overtakes background loads queued before it") {
  fixture f;
  model_actor a, b, c;
  auto ra = f.owner("a", 1, &a);
  auto rb = f.owner("b", 1, &b);
  auto rc = f.owner("c", 1, &c);

  f.enqueue(ra, a, false);  // a starts at once: asks the device for room (not answered yet)
  REQUIRE(f.log->reserves.empty());
  f.enqueue(rb, b, false);  // background, queued behind the running load
  f.enqueue(rc, c, true);   // waited on, queued last
  f.sched->run();  // the device refuses a, then whatever the pool asks next, until all are done

  CHECK(f.log->reserves == std::vector<std::string>{"a", "c", "b"});
  CHECK(f.log->outcomes == std::vector<std::string>{"a#1: failed", "c#1: failed", "b#1: failed"});
}

TEST_CASE(
    "a queued load of an earlier registration gives way to the new one; its late cancel is "
    "ignored") {
  fixture f;
  model_actor x, old_y, new_y;
  auto rx = f.owner("x", 1, &x);
  auto ry1 = f.owner("y", 1, &old_y);
  auto ry2 = f.owner("y", 2, &new_y);

  f.enqueue(rx, x, false);      // x holds the one load slot
  f.enqueue(ry1, old_y, true);  // y (generation 1) queued
  f.enqueue(ry2, new_y, true);  // y registered again: generation 1's queued load is cancelled
  caf::anon_send(f.pool, msg::cancel_load{ry1});  // generation 1's actor, stopping late
  f.pool_handles_one();                           // must not touch generation 2's load
  f.sched->run();

  CHECK(f.log->reserves == std::vector<std::string>{"x", "y"});
  CHECK(f.log->outcomes ==
        std::vector<std::string>{"y#1: cancelled", "x#1: failed", "y#2: failed"});
}
