// Faults injected under real actors: failing and slow loads, failing device allocations, the
// repository directory vanishing and coming back. Whatever fails, every request gets an answer,
// failure records expire so models recover, and device accounting returns to exactly zero.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "support/runtime_fixture.hpp"
#include "warm/fault_injection.hpp"

using namespace warm;
using namespace warm::test;
namespace fs = std::filesystem;

namespace {

// Options hook installing a faulty loader (and, with `devices`, faulty host devices).
std::function<void(runtime_options&)> with_faults(std::shared_ptr<fault_injector> faults,
                                                  bool devices) {
  return [faults, devices](runtime_options& o) {
    o.loader = std::make_shared<faulty_loader>(faults);
    if (devices) o.make_device = faulty_device_factory(faults);
    o.failure_expiry = std::chrono::seconds(30);
  };
}

std::uint64_t used_bytes(runtime& rt) {
  std::uint64_t used = 0;
  for (auto& d : rt.devices())
    used += d->used();
  return used;
}

}  // namespace

TEST_CASE("with 20% of loads failing and slow loads, every request is answered and nothing leaks") {
  fault_plan plan;
  plan.load_failure_rate = 0.2;
  plan.min_load_delay = std::chrono::milliseconds(0);
  plan.max_load_delay = std::chrono::milliseconds(3);
  auto faults = std::make_shared<fault_injector>(plan, 7);
  // Six models, room for three: loads, failures and evictions interleave.
  runtime_fixture f({"m0", "m1", "m2", "m3", "m4", "m5"}, {"host:1700B"}, 2,
                    with_faults(faults, false));
  f.register_all();

  constexpr int threads = 4, per_thread = 150;
  std::atomic<int> answered{0}, succeeded{0}, failed{0}, failed_otherwise{0};
  std::mutex first_other_mutex;
  std::string first_other;  // the first failure that is not the injected load failure
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t)
    clients.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto model = "m" + std::to_string((t * 7 + i * 5) % 6);
        f.rt->infer({model, {input()}}, [&](expected<infer_result> r) {
          // A failure is the load's own error: load_failed naming the injected fault (also when
          // it comes from the failure record, while the model fails fast).
          if (r) {
            succeeded.fetch_add(1);
          } else if (r.error().code == errc::load_failed &&
                     r.error().message.find("injected fault") != std::string::npos) {
            failed.fetch_add(1);
          } else {
            failed_otherwise.fetch_add(1);
            std::lock_guard<std::mutex> guard(first_other_mutex);
            if (first_other.empty())
              first_other = std::string(to_string(r.error().code)) + ": " + r.error().message;
          }
          answered.fetch_add(1);
        });
        if (i % 25 == 0)
          f.time->advance(std::chrono::seconds(31));  // failure records expire now and then
        if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  for (auto& c : clients)
    c.join();
  REQUIRE(eventually([&] { return answered.load() == threads * per_thread; },
                     std::chrono::seconds(60)));
  CHECK(faults->loads_failed() > 0);
  CHECK(failed.load() > 0);
  CHECK(failed_otherwise.load() == 0);
  CHECK(first_other == "");
  CHECK(succeeded.load() > 0);

  // Once faults stop and their records expire, every model loads and serves again.
  faults->set_plan({});
  f.time->advance(std::chrono::seconds(31));
  for (int m = 0; m < 6; ++m)
    CHECK(f.rt->infer({"m" + std::to_string(m), {input()}}).get());

  for (int m = 0; m < 6; ++m)
    REQUIRE(f.rt->unregister_model("m" + std::to_string(m)).get());
  CHECK(eventually([&] { return used_bytes(*f.rt) == 0; }));
}

TEST_CASE("failed allocations are retried on another device, recorded, and recover after expiry") {
  fault_plan plan;
  plan.allocation_failure_rate = 1.0;
  auto faults = std::make_shared<fault_injector>(plan);
  runtime_fixture f({"a"}, {"host:64KiB", "host.1:64KiB"}, 2, with_faults(faults, true));
  f.register_all();

  auto first = f.rt->infer({"a", {input()}}).get();
  REQUIRE_FALSE(first);
  CHECK(first.error().code == errc::load_failed);
  CHECK_THAT(first.error().message, Catch::Contains("injected fault"));
  CHECK(faults->allocations_failed() == 2);  // one attempt per device
  auto inspected = f.rt->inspect().get();
  REQUIRE(inspected);
  CHECK(inspected->failures.size() == 2);
  CHECK(used_bytes(*f.rt) == 0);  // a failed allocation gives its reservation back

  faults->set_plan({});
  auto fast = f.rt->infer({"a", {input()}}).get();  // fails fast while the records last
  REQUIRE_FALSE(fast);
  CHECK(faults->allocations_failed() == 2);
  f.time->advance(std::chrono::seconds(31));
  auto recovered = f.rt->infer({"a", {input()}}).get();
  REQUIRE(recovered);
  CHECK_FALSE(recovered->cache_hit);
  CHECK(state_of(*f.rt, "a") == model_state::loaded);
  REQUIRE(f.rt->unregister_model("a").get());
  CHECK(eventually([&] { return used_bytes(*f.rt) == 0; }));
}

TEST_CASE(
    "the repository vanishing fails the waiting requests; the model recovers as soon as it "
    "returns") {
  auto faults = std::make_shared<fault_injector>();
  runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, with_faults(faults, false));
  f.register_all();
  auto repo = f.dir / "repo";
  auto away = f.dir / "repo.away";
  fs::rename(repo, away);

  std::vector<std::future<expected<infer_result>>> waiting;
  for (int i = 0; i < 50; ++i)
    waiting.push_back(f.rt->infer({"a", {input()}}));
  for (auto& w : waiting) {
    REQUIRE(w.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    auto r = w.get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::load_failed);
  }
  auto st = f.rt->status("a").get();
  REQUIRE(st);
  CHECK(st->state == model_state::loading_failed);
  REQUIRE(st->last_error);
  CHECK(used_bytes(*f.rt) == 0);

  CHECK_FALSE(f.rt->infer({"a", {input()}}).get());  // still away: the record blocks, fail fast
  fs::rename(away, repo);
  CHECK(f.rt->infer({"a", {input()}})
            .get());  // the file is back: the record is stale, no expiry needed
  CHECK(f.rt->infer({"b", {input()}}).get());  // never failed: loads now that the files are back
  REQUIRE(f.rt->unregister_model("a").get());
  REQUIRE(f.rt->unregister_model("b").get());
  CHECK(eventually([&] { return used_bytes(*f.rt) == 0; }));
}
