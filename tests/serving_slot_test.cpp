// Leases and withdrawal: the weights outlive every successful lease and are freed exactly once,
// with clients racing the withdrawal. Also the route table's snapshots under concurrent writers.
// Pure C++ (no actors), so ThreadSanitizer sees every synchronization here.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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
  std::unique_ptr<resident_model> weights() { return dev->load(file).value(); }
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
  CHECK_FALSE(slot.withdraw());        // a lease is out: not quiescent yet
  CHECK_FALSE(slot.try_acquire({}));  // no new leases
  CHECK(l.dev->used() == 544);
  CHECK(lease.model().spec().input_width() == 16);
  lease.reset();
  CHECK(slot.quiesced());
  CHECK(l.dev->used() == 0);
  CHECK(events == std::vector<serving_slot::event>{serving_slot::event::quiesced});
  CHECK(slot.withdraw());  // idempotent
  CHECK(events.size() == 1);
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
    auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), [&](serving_slot::event e) {
      if (e == serving_slot::event::quiesced) ++quiesced;
    });
    std::atomic<bool> go{false};
    std::atomic<long> used_after_withdraw{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 3; ++t)
      clients.emplace_back([&] {
        while (!go) std::this_thread::yield();
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
    for (auto& c : clients) c.join();
    CHECK(used_after_withdraw == 0);
    CHECK(quiesced == 1);
    CHECK(l.dev->used() == 0);
  }
}

TEST_CASE("route table readers see consistent snapshots while writers publish") {
  loaded l;
  route_table routes;
  auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
  std::atomic<bool> stop{false};
  std::atomic<long> found{0}, inconsistent{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        const std::string* model = nullptr;
        auto* s = route_table::find(routes.current(), "v", &model);
        if (s) {
          ++found;
          if (*model != "m" || s->model() != "m") ++inconsistent;
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
  while (found == 0) std::this_thread::yield();
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(inconsistent == 0);
  const std::string* model = nullptr;
  CHECK(route_table::find(routes.current(), "v", &model) == slot.get());
  routes.erase_slot("m", nullptr);  // not the current slot: no change
  CHECK(route_table::find(routes.current(), "m", &model) == slot.get());
  slot->withdraw();
}

TEST_CASE("replacing every alias at once drops the old ones and publishes the new in one snapshot") {
  loaded l;
  route_table routes;
  auto slot = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
  routes.put_slot("m", slot);
  routes.put_alias("old", "m");
  routes.replace_aliases({{"v1", "m"}, {"v2", "m"}});
  const std::string* model = nullptr;
  const auto& after = routes.current();
  CHECK(route_table::find(after, "v1", &model) == slot.get());
  CHECK(*model == "m");
  CHECK(route_table::find(after, "v2", &model) == slot.get());
  const std::string old = "old";
  CHECK(route_table::find(after, old, &model) == nullptr);  // gone: not a model id either
  CHECK(model == &old);
  CHECK(route_table::find(after, "m", &model) == slot.get());  // slots are untouched
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
  std::atomic<bool> stop{false};
  std::atomic<long> leased{0}, freed_under_lease{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        const std::string* model = nullptr;
        auto* s = route_table::find(routes.current(), "m", &model);
        if (!s) continue;
        if (auto lease = s->try_acquire({})) {
          ++leased;
          if (s->quiesced()) ++freed_under_lease;  // checked before touching the weights
          else if (lease.model().spec().input_width() != 16) ++freed_under_lease;
        }
      }
    });
  std::shared_ptr<serving_slot> previous;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int i = 0; i < 3000 || leased < 1000 || std::chrono::steady_clock::now() < until; ++i) {
    auto next = std::make_shared<serving_slot>("m", *l.dev, l.weights(), nullptr);
    routes.put_slot("m", next);
    if (previous) previous->withdraw();  // the eviction of the replaced copy
    previous = std::move(next);
  }
  stop = true;
  for (auto& r : readers) r.join();
  INFO("leases taken: " << leased.load());
  CHECK(freed_under_lease == 0);
  previous->withdraw();
  routes.erase_slot("m", previous.get());
}
