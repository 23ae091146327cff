// Leases and withdrawal: the weights outlive every successful lease and are freed exactly once,
// with clients racing the withdrawal. Also the route table's snapshots under concurrent writers.
// Pure C++ (no actors), so ThreadSanitizer sees every synchronization here.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/route_table.hpp"
#include "core/serving_slot.hpp"
#include "support/test_files.hpp"
#include "warm/model_writer.hpp"

using namespace warm;

namespace {

struct loaded {
  test::temp_dir dir;
  std::unique_ptr<device> dev = make_device(*parse_device_spec("host:1MiB")).value();
  model_file file;
  loaded() {
    auto path = dir / "m.safetensors";
    REQUIRE(write_dense_model(path, {{16, 8}, activation::relu, 1}));
    file = *open_model_file(path);
  }
  // Freed inline, on the thread that quiesces: these tests run no actors.
  warm::weights weights() { return {dev->load(file).value(), inline_reclaim()}; }
};

// Three threads that lease "m" through `routes` until stopped, counting their leases and the
// leases that saw a wrong slot: one already quiesced (checked before touching the weights), or
// weights or a name that are not m's.
class lease_readers {
 public:
  explicit lease_readers(route_table& routes) {
    for (int t = 0; t < 3; ++t)
      threads_.emplace_back([this, &routes] {
        while (!stop_) {
          route_table::read_guard reading;
          if (auto lease = routes.lease("m", {})) {
            ++leased;
            if (lease.slot().quiesced() || input_width(lease.model().io()) != 16 ||
                lease.slot().model() != "m")
              ++wrong;
          }
        }
      });
  }
  ~lease_readers() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  std::atomic<long> leased{0}, wrong{0};

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("a withdrawn slot refuses leases and frees its weights when the last lease ends") {
  loaded l;
  std::vector<serving_slot::event> events;
  serving_slot slot("m", *l.dev, l.weights(), [&](serving_slot::event e) { events.push_back(e); });
  CHECK(l.dev->used() == 544);
  auto lease = slot.try_acquire(timestamp{} + std::chrono::seconds(5));
  REQUIRE(lease);
  CHECK(slot.in_flight() == 1);
  CHECK(slot.uses() == 1);
  CHECK(slot.last_used() == timestamp{} + std::chrono::seconds(5));
  CHECK_FALSE(slot.withdraw());       // a lease is out: not quiescent yet
  CHECK_FALSE(slot.try_acquire({}));  // no new leases
  CHECK(l.dev->used() == 544);
  CHECK(input_width(lease.model().io()) == 16);
  lease.reset();
  CHECK(slot.quiesced());
  CHECK(l.dev->used() == 0);
  CHECK(events == std::vector<serving_slot::event>{serving_slot::event::quiesced});
  CHECK(slot.withdraw());  // idempotent
  CHECK(events.size() == 1);
}

TEST_CASE(
    "a request that waited for the load is served but not a use: the load was its reference") {
  loaded l;
  serving_slot slot("m", *l.dev, l.weights(), [](serving_slot::event) {});
  auto waited = slot.try_acquire(timestamp{} + std::chrono::seconds(3), false);
  REQUIRE(waited);
  CHECK(slot.uses() == 0);    // what the policy is told: nothing beyond the load
  CHECK(slot.served() == 1);  // what an operator sees
  CHECK(slot.last_used() == timestamp{} + std::chrono::seconds(3));
  auto hit = slot.try_acquire(timestamp{} + std::chrono::seconds(4));
  CHECK(slot.uses() == 1);
  CHECK(slot.served() == 2);
  CHECK(slot.last_used() == timestamp{} + std::chrono::seconds(4));
  hit.reset();
  waited.reset();
  slot.withdraw();
  CHECK_FALSE(slot.try_acquire({}, false));  // refused: neither a use nor served
  CHECK_FALSE(slot.try_acquire({}));
  CHECK(slot.uses() == 1);
  CHECK(slot.served() == 2);
}

TEST_CASE("notify_when_idle reports the next time the in-flight count drops to zero") {
  loaded l;
  std::vector<serving_slot::event> events;
  serving_slot slot("m", *l.dev, l.weights(), [&](serving_slot::event e) { events.push_back(e); });
  CHECK(slot.notify_when_idle());  // idle already: no event
  auto a = slot.try_acquire({});
  auto b = slot.try_acquire({});
  CHECK_FALSE(slot.notify_when_idle());
  a.reset();
  CHECK(events.empty());
  b.reset();
  CHECK(events == std::vector<serving_slot::event>{serving_slot::event::idle});
  slot.withdraw();
}

TEST_CASE("clients racing a withdrawal never use freed weights and the bytes come back once") {
  for (int round = 0; round < 50; ++round) {
    loaded l;
    std::atomic<int> quiesced{0};
    auto slot =
        std::make_shared<serving_slot>("m", *l.dev, l.weights(), [&](serving_slot::event e) {
          if (e == serving_slot::event::quiesced) ++quiesced;
        });
    std::atomic<bool> go{false};
    std::atomic<long> used_after_withdraw{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 3; ++t)
      clients.emplace_back([&] {
        while (!go)
          std::this_thread::yield();
        for (int i = 0; i < 2000; ++i) {
          auto lease = slot->try_acquire({});
          if (!lease) continue;
          // The weights must be there for the whole lease.
          if (lease.model().bytes() != 544 || l.dev->used() != 544) ++used_after_withdraw;
        }
      });
    go = true;
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 5)));
    slot->withdraw();
    for (auto& c : clients)
      c.join();
    CHECK(used_after_withdraw == 0);
    CHECK(quiesced == 1);
    CHECK(l.dev->used() == 0);
  }
}

TEST_CASE("route table readers see consistent entries while writers publish") {
  loaded l;
  route_table routes;
  auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
  std::atomic<bool> stop{false};
  std::atomic<long> found{0}, inconsistent{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        route_table::read_guard reading;
        if (auto lease = routes.lease("v", {})) {
          ++found;
          if (lease.slot().model() != "m") ++inconsistent;
        }
      }
    });
  for (int i = 0; i < 2000; ++i) {
    routes.put_slot("m", slot);
    routes.put_alias("v", "m");
    routes.erase_alias("v");
    routes.erase_slot("m", slot.get());
  }
  routes.put_slot("m", slot);
  routes.put_alias("v", "m");
  while (found == 0)
    std::this_thread::yield();
  stop = true;
  for (auto& r : readers)
    r.join();
  CHECK(inconsistent == 0);
  route_table::read_guard reading;
  CHECK(routes.lease("v", {}).slot().model() == "m");
  CHECK(routes.resolve("v") == "m");
  routes.erase_slot("m", nullptr);  // not the current slot: no change
  CHECK(routes.lease("m", {}));
  slot->withdraw();
}

TEST_CASE(
    "replacing every alias at once drops the old ones and publishes the new in one snapshot") {
  loaded l;
  route_table routes;
  auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
  routes.put_slot("m", slot);
  routes.put_alias("old", "m");
  route_table::read_guard reading;
  auto before = routes.publications();
  routes.replace_aliases({{"v1", "m"}, {"v2", "m"}});
  CHECK(routes.publications() == before + 1);
  CHECK(routes.lease("v1", {}).slot().model() == "m");
  CHECK(routes.lease("v2", {}).slot().model() == "m");
  CHECK_FALSE(routes.lease("old", {}));  // gone: not a model id either
  CHECK(routes.resolve("old") == "old");
  CHECK(routes.lease("m", {}));  // slots are untouched
  slot->withdraw();
}

// The hit path's race with eviction, at full speed: readers lease through the route table and read
// the weights while a writer keeps installing a new slot and withdrawing the one it replaced. A
// release that empties the count must not free the weights because of a withdrawal that came
// after a new lease was taken: that lease would read freed weights (with the count and the flag in
// separate words it did, in about 1 run in 5; ASan and TSan run this test too).
TEST_CASE("leases taken while slots are replaced and withdrawn never see freed weights") {
  loaded l;
  route_table routes;
  lease_readers readers(routes);
  std::shared_ptr<serving_slot> previous;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int i = 0; i < 3000 || readers.leased < 1000 || std::chrono::steady_clock::now() < until;
       ++i) {
    auto next = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
    routes.put_slot("m", next);
    if (previous) previous->withdraw();  // the eviction of the replaced copy
    previous = std::move(next);
  }
  readers.stop();
  INFO("leases taken: " << readers.leased.load());
  CHECK(readers.wrong == 0);
  previous->withdraw();
  routes.erase_slot("m", previous.get());
}

// A load or an eviction of a model that has an entry changes that entry only: no snapshot of the
// whole table is copied and published.
TEST_CASE("loads and evictions touch one entry; the table publishes only for new ids and aliases") {
  std::vector<loaded> models(3);
  route_table routes;
  auto make = [&](int i) {
    return std::make_shared<serving_slot>("m" + std::to_string(i), *models[i].dev,
                                          models[i].weights(), nullptr);
  };
  auto first = make(0);
  route_table::read_guard reading;
  routes.put_slot("m0", first);
  auto after_first = routes.publications();
  CHECK(after_first > 1);  // a new id: one publication
  first->withdraw();
  routes.erase_slot("m0", first.get());
  CHECK_FALSE(routes.lease("m0", {}));
  auto second = make(0);
  routes.put_slot("m0", second);  // the same id again: the entry is reused
  CHECK(routes.publications() == after_first);
  CHECK(routes.lease("m0", {}).slot().model() == "m0");
  CHECK(routes.entries() == 1);
  second->withdraw();
  routes.erase_slot("m0", second.get());
  CHECK(routes.publications() == after_first);
}

// An unlinked slot stays alive while a guard that may have read it lives (its lease can end on
// it), and is released at the first write after.
TEST_CASE("the table keeps an unlinked slot until no reader that saw it is left") {
  loaded l;
  route_table routes;
  auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
  std::weak_ptr<serving_slot> watch = slot;
  routes.put_slot("m", slot);
  {
    route_table::read_guard reading;
    auto lease = routes.lease("m", {});
    REQUIRE(lease);
    CHECK_FALSE(slot->withdraw());  // a lease is out
    routes.erase_slot("m", slot.get());
    slot.reset();  // the table's reference is the last one
    CHECK(routes.retired() == 1);
    CHECK_FALSE(watch.expired());
    CHECK(input_width(lease.model().io()) == 16);
    lease.reset();  // quiesces the slot: it frees its weights, and release() touched the slot
    routes.erase_slot("other", nullptr);  // a write while the guard lives: still kept
    CHECK_FALSE(watch.expired());
  }
  CHECK(routes.retired() == 1);  // released by a writer, not by the reader
  routes.erase_slot("other", nullptr);
  CHECK(routes.retired() == 0);
  CHECK(watch.expired());
  CHECK(l.dev->used() == 0);
}

// Many entries emptied by evictions are compacted away, amortized, and come back on the next load.
TEST_CASE("empty entries are compacted once they are as many as the filled ones") {
  loaded l;
  route_table routes;
  std::vector<std::shared_ptr<serving_slot>> slots;
  for (int i = 0; i < 200; ++i) {
    slots.push_back(
        std::make_shared<serving_slot>("m" + std::to_string(i), *l.dev, l.weights(), nullptr));
    routes.put_slot("m" + std::to_string(i), slots.back());
  }
  CHECK(routes.entries() == 200);
  for (int i = 0; i < 150; ++i) {
    slots[i]->withdraw();
    routes.erase_slot("m" + std::to_string(i), slots[i].get());
  }
  CHECK(routes.entries() < 200);
  CHECK(routes.entries() >= 50);
  route_table::read_guard reading;
  for (int i = 150; i < 200; ++i)
    CHECK(routes.lease("m" + std::to_string(i), {}));
  auto again = std::make_shared<serving_slot>("m0", *l.dev, l.weights(), nullptr);
  routes.put_slot("m0", again);
  CHECK(routes.lease("m0", {}));
  again->withdraw();
  for (int i = 150; i < 200; ++i)
    slots[i]->withdraw();
}

// The reclamation protocol under load: readers lease and read the weights while a writer keeps
// replacing the model's slot and dropping every reference of its own. A slot released while a
// reader could still reach it is a use after free (ASan and TSan run this test).
TEST_CASE("readers never touch a released slot while writers replace it") {
  loaded l;
  route_table routes;
  lease_readers readers(routes);
  std::shared_ptr<serving_slot> previous;
  for (int i = 0; i < 3000 || readers.leased < 100; ++i) {
    auto next = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
    routes.put_slot("m", next);
    if (previous) previous->withdraw();  // an eviction: leases in flight finish on it
    previous = std::move(next);
    if (i % 3 == 0) {
      previous->withdraw();
      routes.erase_slot("m", previous.get());
      previous.reset();  // the table's reference is the last
    }
  }
  readers.stop();
  CHECK(readers.wrong == 0);
  INFO("leases taken: " << readers.leased.load());
  CHECK(readers.leased >= 100);
  if (previous) previous->withdraw();
  routes.erase_slot("m", previous.get());
  CHECK(routes.retired() == 0);  // every unlinked slot was released once safe
  CHECK(l.dev->used() == 0);
}

// The release that empties the count may still be calling the callback (an idle event) when a
// withdrawal on another thread finds the count empty and quiesces. Quiescing once moved the
// callback out of the slot, a write racing that call (ThreadSanitizer saw it in eviction_test).
// Run under TSan (tools/sanitize tsan) this reports the race within a few hundred rounds when
// the callback is moved; in every build it checks that each round ends with exactly one
// quiesced event.
TEST_CASE("an idle event racing a withdrawal calls a live callback; quiesced comes exactly once") {
  loaded l;
  for (int round = 0; round < 500; ++round) {
    std::atomic<int> quiesced{0}, idle{0};
    auto slot =
        std::make_shared<serving_slot>("m", *l.dev, l.weights(), [&](serving_slot::event e) {
          (e == serving_slot::event::quiesced ? quiesced : idle).fetch_add(1);
        });
    auto lease = slot->try_acquire({});
    REQUIRE(lease);
    REQUIRE_FALSE(slot->notify_when_idle());  // a lease is out: the idle event is wanted
    std::atomic<bool> go{false};
    std::thread releaser([&] {
      while (!go)
        std::this_thread::yield();
      lease.reset();
    });
    std::thread withdrawer([&] {
      while (!go)
        std::this_thread::yield();
      slot->withdraw();
    });
    go = true;
    releaser.join();
    withdrawer.join();
    CHECK(quiesced == 1);
    CHECK(idle <= 1);
  }
  CHECK(l.dev->used() == 0);
}
