// The importance scorer with real actors: heaps rebuilt every few milliseconds and swapped into
// the device while requests race evictions. A model with a lease out is never evicted, and the
// device's bytes always equal its resident models plus those still draining.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "support/runtime_fixture.hpp"
#include "warm/actor_messages.hpp"
#include "warm/runtime_actors.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;
using warm::test::small_model_bytes;

namespace {

std::shared_ptr<msg::acquired> hold(runtime& rt, const std::string& id) {
  auto promise = std::make_shared<std::promise<expected<msg::acquired>>>();
  auto future = promise->get_future();
  caf::anon_send(actors_of(rt).registry, msg::use_model{id, msg::use_kind::wait, {}, [promise](expected<msg::acquired> a) {
                                                           promise->set_value(std::move(a));
                                                         }});
  auto a = future.get();
  if (!a) return nullptr;
  return std::make_shared<msg::acquired>(std::move(*a));
}

}  // namespace

TEST_CASE("iam heaps swapped in while requests race evictions keep pinned models and exact accounting") {
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) names.push_back("m" + std::to_string(i));
  // Room for four models.
  test::runtime_fixture f(names, {"host:" + std::to_string(4 * small_model_bytes + 100)}, 2, [](runtime_options& o) {
    o.policy = "iam";
    o.rescore_period = 2ms;
  });
  f.register_all();

  // m0 stays pinned by a lease for the whole test.
  auto pinned = hold(*f.rt, "m0");
  REQUIRE(pinned);

  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(c + 1);
      std::uniform_int_distribution<int> pick(1, 11);
      while (!stop) {
        auto r = f.rt->infer({names[pick(rng)], {test::input()}}).get();
        (r ? answered : failed)++;
      }
    });

  bool consistent = true, pinned_resident = true;
  int checks = 0, swaps_seen = 0;
  for (auto deadline = std::chrono::steady_clock::now() + 1500ms; std::chrono::steady_clock::now() < deadline;) {
    auto snapshot = f.rt->inspect().get();
    REQUIRE(snapshot);
    auto& dev = snapshot->devices.at(0);
    std::uint64_t resident = 0;
    bool has_m0 = false;
    for (auto& r : dev.resident) {
      resident += r.bytes;
      has_m0 = has_m0 || r.model == "m0";
    }
    // Loads in flight hold reservations too: used is at least resident + draining, never above
    // capacity, and at most that plus the reservations of max_concurrent_loads loads.
    if (dev.used < resident + dev.draining || dev.used > dev.capacity ||
        dev.used > resident + dev.draining + 2 * small_model_bytes)
      consistent = false;
    pinned_resident = pinned_resident && has_m0;
    swaps_seen = static_cast<int>(dev.score_swaps);
    ++checks;
    std::this_thread::sleep_for(5ms);
  }
  stop = true;
  for (auto& c : clients) c.join();

  CHECK(consistent);
  CHECK(pinned_resident);
  CHECK(failed == 0);
  CHECK(answered > 20);
  CHECK(swaps_seen > 10);
  auto snapshot = f.rt->inspect().get();
  CHECK(snapshot->importance_rebuilds > 10);
  CHECK(snapshot->devices[0].evictions > 5);

  // Quiet now: the device holds exactly its residents.
  pinned.reset();
  REQUIRE(eventually([&] {
    auto s = f.rt->inspect().get();
    std::uint64_t resident = 0;
    for (auto& r : s->devices[0].resident) resident += r.bytes;
    return s->devices[0].used == resident && s->devices[0].draining == 0;
  }));
}
