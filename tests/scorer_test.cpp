// The importance scorer with real actors: heaps rebuilt every few milliseconds and swapped into
// the device while requests race evictions. A model with a lease out is never evicted, and the
// device's bytes always equal its resident models plus those still draining.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "actors/protocol/registry_protocol.hpp"
#include "policy/cache_policy.hpp"
#include "runtime/runtime_actors.hpp"
#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;
using warm::test::small_model_bytes;

namespace {

std::shared_ptr<acquired> hold(runtime& rt, const std::string& id) {
  auto promise = std::make_shared<std::promise<expected<acquired>>>();
  auto future = promise->get_future();
  caf::anon_send(actors_of(rt).registry,
                 msg::use_model{id, use_kind::wait, {}, [promise](expected<acquired> a) {
                                  promise->set_value(std::move(a));
                                }});
  auto a = future.get();
  if (!a) return nullptr;
  return std::make_shared<acquired>(std::move(*a));
}

// Two clients hammer 11 models on a device with room for four while m0 stays pinned; returns
// after `duration`, having checked the device's accounting every 5 ms.
void race(const std::string& policy, std::chrono::milliseconds duration) {
  INFO("policy " << policy);
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i)
    names.push_back("m" + std::to_string(i));
  test::runtime_fixture f(names, {"host:" + std::to_string(4 * small_model_bytes + 100)}, 2,
                          [&](runtime_options& o) {
                            o.policy = policy;
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
  // The race runs for `duration`, and on a slow build (sanitizers) on until it has seen enough
  // traffic to mean something (bounded: the checks after the loop then fail).
  auto started = std::chrono::steady_clock::now();
  std::uint64_t evictions_seen = 0;
  auto racing = [&] {
    auto now = std::chrono::steady_clock::now();
    bool enough = answered > 40 && evictions_seen > 10 && (policy != "iam" || swaps_seen > 20);
    return now < started + duration || (!enough && now < started + 30s);
  };
  while (racing()) {
    auto snapshot = f.rt->inspect().get();
    REQUIRE(snapshot);
    auto& dev = snapshot->devices.at(0);
    evictions_seen = dev.evictions;
    std::uint64_t resident = 0;
    bool has_m0 = false;
    for (auto& r : dev.resident) {
      resident += r.bytes;
      has_m0 = has_m0 || r.model == "m0";
    }
    // Loads in flight hold reservations too: used is at least the residents' bytes, never above
    // capacity, and at most resident + draining + the reservations of max_concurrent_loads loads.
    // (A draining slot's bytes return the moment its last lease ends, a little before the device
    // hears of it, so draining bytes may already be gone from `used`.)
    if (dev.used < resident || dev.used > dev.capacity ||
        dev.used > resident + dev.draining + 2 * small_model_bytes || dev.untracked != 0)
      consistent = false;
    // Time moves, so request rates (and with them iam's scores and kdf's values) change between
    // rebuilds and the swapped heaps reorder the models.
    f.time->advance(200ms);
    pinned_resident = pinned_resident && has_m0;
    swaps_seen = static_cast<int>(dev.score_swaps);
    ++checks;
    std::this_thread::sleep_for(5ms);
  }
  stop = true;
  for (auto& c : clients)
    c.join();

  CHECK(consistent);
  CHECK(pinned_resident);
  CHECK(failed == 0);
  CHECK(answered > 20);
  auto snapshot = f.rt->inspect().get();
  CHECK(snapshot->devices[0].evictions > 5);
  if (policy == "iam") {
    CHECK(swaps_seen > 10);
    CHECK(snapshot->importance_rebuilds > 10);
  }

  // Quiet now: the device holds exactly its residents, and the policy ranks exactly those.
  pinned.reset();
  REQUIRE(eventually([&] {
    auto s = f.rt->inspect().get();
    std::uint64_t resident = 0;
    for (auto& r : s->devices[0].resident)
      resident += r.bytes;
    return s->devices[0].used == resident && s->devices[0].draining == 0 &&
           s->devices[0].untracked == 0;
  }));
}

}  // namespace

TEST_CASE(
    "iam heaps swapped in while requests race evictions keep pinned models and exact accounting") {
  race("iam", 1500ms);
}

TEST_CASE("every policy keeps pinned models and exact accounting under racing requests") {
  for (auto& policy : policy_names())
    race(policy, 250ms);
}
