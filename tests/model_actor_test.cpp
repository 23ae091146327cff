// One model actor alone, on CAF's deterministic test coordinator: its loader pool and device are
// fakes that record what the model asks of them, and its clients are actors that request uses
// and record the answers. The test decides when the pool's answers (load_started, load_done,
// load_failed, load_cancelled) arrive relative to the uses, so the cold-start coalescing ("one
// load however many wait") is checked in the orders that matter, the same way every run.
#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/model_actor.hpp"
#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "storage/located_file.hpp"
#include "support/test_files.hpp"
#include "warm/model_writer.hpp"

using namespace std::chrono_literals;
using namespace warm;

namespace {

// What the fakes and clients saw, in order. Everything runs on the test's thread.
struct seen {
  std::vector<bool> enqueues;          // each enqueue_load's `waiting`
  std::vector<std::uint32_t> waiters;  // each load_waiters' count
  std::vector<std::string> answers;    // "hit" / "miss" / "proactive" / the error's message
  int cancels = 0;
  int forgets = 0;                      // forget_failures
  std::vector<std::string> unexpected;  // what a fake should never be sent (checked empty)
};

// The fakes are typed: each takes its actor's whole interface, so a message added to an
// interface must be thought about here, and what a model actor should never send is recorded.

// The loader pool, as far as a model actor talks to it.
loader_pool_actor::behavior_type recording_pool(loader_pool_actor::pointer,
                                                std::shared_ptr<seen> log) {
  return {
      [=](msg::enqueue_load& m) { log->enqueues.push_back(m.waiting); },
      [=](msg::load_waiters& m) { log->waiters.push_back(m.waiters); },
      [=](msg::cancel_load&) { ++log->cancels; },
      [=](msg::forget_failures&) { ++log->forgets; },
      [=](msg::device_freed&) { log->unexpected.push_back("pool: device_freed"); },
      [=](msg::models_lost&) { log->unexpected.push_back("pool: models_lost"); },
      [=](msg::attach_devices&) { log->unexpected.push_back("pool: attach_devices"); },
      [=](msg::inspect_loads&) { log->unexpected.push_back("pool: inspect_loads"); },
  };
}

// A device that takes withdrawals and ignores them.
device_actor::behavior_type quiet_device(device_actor::pointer, std::shared_ptr<seen> log) {
  return {
      [](msg::withdraw_slot&) {},
      [=](msg::reserve&) -> caf::result<msg::reserve_result> {
        log->unexpected.push_back("device: reserve");
        return msg::reserve_result{};
      },
      [=](msg::install&) { log->unexpected.push_back("device: install"); },
      [=](msg::slot_released&) { log->unexpected.push_back("device: slot_released"); },
      [=](msg::device_changed&) { log->unexpected.push_back("device: device_changed"); },
      [=](msg::collect_scores&) -> caf::result<msg::scores_collected> {
        log->unexpected.push_back("device: collect_scores");
        return to_caf_error(make_error(errc::invalid_argument, "no scores here"));
      },
      [=](msg::swap_scores&) { log->unexpected.push_back("device: swap_scores"); },
      [=](msg::inspect_device&) { log->unexpected.push_back("device: inspect_device"); },
      [=](msg::pin_model&) { log->unexpected.push_back("device: pin_model"); },
  };
}

// A client: requests one use of `model` when told to, and records the answer.
caf::behavior client(caf::event_based_actor* self, std::shared_ptr<seen> log, model_actor model) {
  return {
      [=](msg::model_use& use) {
        self->request(model, caf::infinite, use)
            .then(
                [=](msg::granted& g) {
                  if (!g.value || !g.value->slot)
                    log->answers.push_back("proactive");
                  else
                    log->answers.push_back(g.value->hit ? "hit" : "miss");
                },
                [=](caf::error& e) { log->answers.push_back(from_caf_error(e).message); });
      },
  };
}

struct fixture {
  test::temp_dir dir;
  std::unique_ptr<device> dev = make_device(*parse_device_spec("host:1MiB")).value();
  model_file file;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<seen> log = std::make_shared<seen>();
  std::shared_ptr<manual_clock> time = std::make_shared<manual_clock>();
  std::shared_ptr<route_table> routes = std::make_shared<route_table>();
  loader_pool_actor pool;
  device_actor device_handle;
  model_actor model;
  std::vector<caf::actor> clients;
  model_location where;
  std::shared_ptr<std::vector<std::function<void()>>> offloaded =
      std::make_shared<std::vector<std::function<void()>>>();  // run by run_offloaded()

  fixture() {
    auto path = dir / "m.safetensors";
    REQUIRE(write_dense_model(path, {{16, 8}, activation::relu, 1}));
    file = *open_model_file(path);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    pool = sys->spawn(recording_pool, log);
    device_handle = sys->spawn(quiet_device, log);
    model_actor_config config;
    config.id = "m";
    config.generation = 1;
    config.bytes = 544;
    config.pool = pool;
    config.routes = routes;
    config.time = time;
    where = model_location::unconfined(path);
    config.where = where;
    config.offload = [tasks = offloaded](std::function<void()> task) {
      tasks->push_back(std::move(task));
    };
    model = spawn_model_actor(*sys, config);
    sched->run();
  }

  ~fixture() {
    CHECK(log->unexpected.empty());
    caf::anon_send_exit(model, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(device_handle, caf::exit_reason::user_shutdown);
    for (auto& c : clients)
      caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    sched->run();
  }

  // A new client requests one use; runs until the model has handled it (and told the pool).
  void use(use_kind kind = use_kind::wait) {
    clients.push_back(sys->spawn(client, log, model));
    sched->run();
    caf::anon_send(clients.back(), msg::model_use{kind, time->now()});
    sched->run();
  }

  // Sends the model a message as the device would (load_done's sender is the device it unloads
  // from).
  template <class Message>
  void from_device(Message m) {
    caf::send_as(caf::actor_cast<caf::actor>(device_handle), model, std::move(m));
    sched->run();
  }
  template <class Message>
  void from_pool(Message m) {
    caf::send_as(caf::actor_cast<caf::actor>(pool), model, std::move(m));
    sched->run();
  }
  // Runs the tasks the model gave its offload (looks at its file), then their messages.
  void run_offloaded() {
    auto tasks = std::move(*offloaded);
    offloaded->clear();
    for (auto& t : tasks)
      t();
    sched->run();
  }
  // The pool's load_failed as the pool would send it: the file as the failed load saw it now.
  void fail_load(const std::string& why) {
    from_pool(
        msg::load_failed{make_error(errc::load_failed, why), time->now() + 10s, look_at(where)});
  }
  std::shared_ptr<serving_slot> slot() {
    return std::make_shared<serving_slot>(
        "m", *dev, weights{dev->load(file).value(), inline_reclaim()}, nullptr);
  }
};

}  // namespace

TEST_CASE("concurrent cold starts of one model make one load, and every waiter gets its lease") {
  fixture f;
  f.use();
  f.use();
  f.use();
  CHECK(f.log->enqueues == std::vector<bool>{true});          // one load for three waiters
  CHECK(f.log->waiters == std::vector<std::uint32_t>{2, 3});  // the queue shows how many wait
  CHECK(f.log->answers.empty());

  f.from_pool(msg::load_started{"host", nullptr});
  f.use();  // arrives while loading: waits on the same load, which the pool need not hear of
  CHECK(f.log->enqueues.size() == 1);
  CHECK(f.log->waiters.size() == 2);

  f.from_device(msg::load_done{"host", f.slot(), 0.01});
  CHECK(f.log->answers == std::vector<std::string>{"miss", "miss", "miss", "miss"});
  f.use();  // loaded: answered at once
  CHECK(f.log->answers.back() == "hit");
  CHECK(f.log->enqueues.size() == 1);
}

TEST_CASE("a failed load fails every waiter, and the next use fails fast until the retry time") {
  fixture f;
  f.use();
  f.use();
  f.from_pool(msg::load_failed{make_error(errc::load_failed, "disk on fire"), f.time->now() + 10s,
                               std::nullopt});
  REQUIRE(f.log->answers.size() == 2);
  CHECK(f.log->answers[0] == "disk on fire");
  CHECK(f.log->answers[1] == "disk on fire");

  f.use();  // before retry_at: fails fast, no load
  CHECK(f.log->answers.back() == "disk on fire");
  CHECK(f.log->enqueues.size() == 1);

  f.time->advance(10s);
  f.use();  // at retry_at: a new load
  CHECK(f.log->enqueues.size() == 2);
}

TEST_CASE(
    "a use while failing fast looks at the file: unchanged it fails fast, changed it loads again") {
  fixture f;
  f.use();
  f.fail_load("bad header");
  REQUIRE(f.log->answers == std::vector<std::string>{"bad header"});

  f.use();  // held while the file is looked at, once for both uses
  f.use();
  CHECK(f.log->answers.size() == 1);
  CHECK(f.offloaded->size() == 1);
  f.run_offloaded();  // unchanged: both fail fast, in order, and nothing is loaded
  CHECK(f.log->answers == std::vector<std::string>{"bad header", "bad header", "bad header"});
  CHECK(f.log->enqueues.size() == 1);
  CHECK(f.log->forgets == 0);

  std::this_thread::sleep_for(2ms);  // a new mtime even on a coarse clock
  REQUIRE(write_dense_model(f.where.path, {{16, 4}, activation::relu, 1}));  // fixed
  f.use();
  f.use();
  f.run_offloaded();  // changed: the failure is forgotten and both wait for one new load
  CHECK(f.log->forgets == 1);
  CHECK(f.log->enqueues.size() == 2);
  CHECK(f.log->answers.size() == 3);
  f.from_pool(msg::load_started{"host", nullptr});
  f.from_device(msg::load_done{"host", f.slot(), 0.01});
  CHECK(f.log->answers.size() == 5);
  CHECK(f.log->answers.back() == "miss");
  CHECK(f.offloaded->empty());  // loaded: no more looks
}

TEST_CASE(
    "a failed load whose file vanished or appeared is stale; a failure without a look is not") {
  fixture f;
  f.use();
  f.fail_load("gone");
  std::filesystem::remove(f.where.path);
  f.use();
  f.run_offloaded();
  CHECK(f.log->enqueues.size() ==
        2);                  // the file vanished since: a new load tells what is wrong now
  f.fail_load("not found");  // the load saw no file
  f.use();
  f.run_offloaded();
  CHECK(f.log->answers.back() == "not found");  // still absent: fails fast
  CHECK(f.log->enqueues.size() == 2);
  REQUIRE(write_dense_model(f.where.path, {{16, 8}, activation::relu, 1}));
  f.use();
  f.run_offloaded();
  CHECK(f.log->enqueues.size() == 3);  // it appeared

  // Refused by every device, no load ran: nothing to compare, so no look.
  f.from_pool(msg::load_failed{make_error(errc::model_too_large, "too big"), f.time->now() + 10s,
                               std::nullopt});
  f.use();
  CHECK(f.offloaded->empty());
  CHECK(f.log->answers.back() == "too big");
  CHECK(f.log->enqueues.size() == 3);
}

TEST_CASE(
    "uses held for a look at the file are answered not_found when the model is unregistered") {
  fixture f;
  f.use();
  f.fail_load("bad header");
  f.use();
  f.use();
  REQUIRE(f.offloaded->size() == 1);
  caf::anon_send(f.model, msg::model_unregister{});
  f.sched->run();
  REQUIRE(f.log->answers.size() == 3);  // at once, not when the look comes back
  CHECK(f.log->answers[1] == "model 'm' was unregistered");
  CHECK(f.log->answers[2] == "model 'm' was unregistered");
  f.run_offloaded();  // the look's answer finds nothing to do
  CHECK(f.log->answers.size() == 3);
  CHECK(f.log->enqueues.size() == 1);
}

TEST_CASE("a proactive use is answered at once; a waiting one that follows rides on its load") {
  fixture f;
  f.use(use_kind::proactive);
  CHECK(f.log->answers == std::vector<std::string>{"proactive"});
  CHECK(f.log->enqueues == std::vector<bool>{false});
  f.use();  // now someone waits: the pool hears it (promoted), but still one load
  CHECK(f.log->enqueues == std::vector<bool>{false, true});
  f.from_device(msg::load_done{"host", f.slot(), 0.01});
  CHECK(f.log->answers.back() == "miss");
}

TEST_CASE("a cancelled load with waiters is queued again; the waiters are not dropped") {
  fixture f;
  f.use();
  f.from_pool(msg::load_cancelled{});  // e.g. a device refused and the pool dropped it
  CHECK(f.log->enqueues == std::vector<bool>{true, true});
  CHECK(f.log->answers.empty());
  f.from_device(msg::load_done{"host", f.slot(), 0.01});
  CHECK(f.log->answers == std::vector<std::string>{"miss"});
}

TEST_CASE("unregistering fails the waiters with not_found and cancels the load") {
  fixture f;
  f.use();
  f.use();
  caf::anon_send(f.model, msg::model_unregister{});
  f.sched->run();
  REQUIRE(f.log->answers.size() == 2);
  CHECK(f.log->answers[0] == "model 'm' was unregistered");
  CHECK(f.log->cancels == 1);
}

TEST_CASE(
    "a client's use is answered to its own callback, and `unavailable` if the model stops first") {
  fixture f;
  std::vector<std::string> got;
  auto use_with_callback = [&] {
    auto record = [&got](expected<acquired> a) {
      got.push_back(!a ? a.error().message : a->hit ? "hit" : "miss");
    };
    caf::anon_send(f.model,
                   msg::client_use{use_kind::wait, f.time->now(), once_callback<acquired>(record)});
    f.sched->run();
  };
  use_with_callback();
  f.use();  // a request rides on the same load
  CHECK(f.log->enqueues.size() == 1);
  auto slot = f.slot();
  f.from_device(msg::load_done{"host", slot, 0.01});
  CHECK(got == std::vector<std::string>{"miss"});
  CHECK(f.log->answers == std::vector<std::string>{"miss"});
  use_with_callback();
  CHECK(got.back() == "hit");

  f.from_device(msg::slot_evicted{slot});  // evicted
  use_with_callback();                     // waits for a new load
  CHECK(f.log->enqueues.size() == 2);
  CHECK(got.size() == 2);
  caf::anon_send_exit(f.model, caf::exit_reason::user_shutdown);
  f.sched->run();
  REQUIRE(got.size() == 3);
  CHECK(got[2] == "model 'm': the runtime is shutting down");
}
