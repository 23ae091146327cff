// One load per cold start, and load priority: the loader pool and model actors driven through
// warm::runtime with a gated loader.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

TEST_CASE("1000 concurrent requests for a cold model cause exactly one load and all get answered") {
  test::runtime_fixture f({"cold"});
  f.register_all();
  f.loader->hold();

  constexpr int n = 1000;
  std::atomic<int> answered{0}, ok{0}, hits{0};
  for (int i = 0; i < n; ++i) {
    if (i % 10 == 9) {  // a tenth are ensureLoaded --sync, the rest inferences
      f.rt->ensure_loaded("cold", true, [&](expected<void> r) {
        ok += r.has_value();
        ++answered;
      });
    } else {
      f.rt->infer({"cold", {test::input()}}, [&](expected<infer_result> r) {
        if (r && r->outputs.size() == 1 && r->outputs[0].shape == std::vector<std::uint64_t>{1, 8})
          ++ok;
        if (r && r->cache_hit) ++hits;
        ++answered;
      });
    }
  }
  REQUIRE(f.loader->wait_started(1));
  CHECK(eventually([&] { return test::state_of(*f.rt, "cold") == model_state::loading; }));
  CHECK(answered == 0);  // everyone waits for the one load
  f.time->advance(250ms);
  f.loader->open_gate();
  REQUIRE(eventually([&] { return answered == n; }));
  CHECK(ok == n);
  CHECK(hits == 0);
  CHECK(f.loader->loads_of("cold") == 1);

  auto hit = f.rt->infer({"cold", {test::input()}}).get();
  REQUIRE(hit);
  CHECK(hit->cache_hit);
  CHECK(hit->model == "cold");
  auto st = f.rt->status("cold").get();
  REQUIRE(st);
  CHECK(st->state == model_state::loaded);
  CHECK(st->requests == n + 1);
  CHECK(st->hits == 1);
  CHECK(st->loads.count == 1);
}

TEST_CASE("every waiter of a failing cold start gets the load's error") {
  test::runtime_fixture f({"broken"});
  f.register_all();
  f.loader->fail("broken");
  f.loader->hold();
  constexpr int n = 1000;
  std::atomic<int> answered{0}, failed{0};
  for (int i = 0; i < n; ++i)
    f.rt->infer({"broken", {test::input()}}, [&](expected<infer_result> r) {
      if (!r && r.error().code == errc::load_failed &&
          r.error().message.find("injected failure") != std::string::npos)
        ++failed;
      ++answered;
    });
  REQUIRE(f.loader->wait_started(1));
  f.loader->open_gate();
  REQUIRE(eventually([&] { return answered == n; }));
  CHECK(failed == n);
  CHECK(f.loader->loads_of("broken") == 1);  // one device: no retry elsewhere
}

TEST_CASE(
    "waiting loads go first, earliest request first; then proactive loads, most recently used "
    "first") {
  test::runtime_fixture f({"blocker", "p_old", "p_new", "w1", "w2", "promoted", "cancelled"},
                          {"host:64KiB"}, 1);
  f.register_all();
  f.loader->hold();
  REQUIRE(f.rt->ensure_loaded("blocker").get());  // occupies the only load slot
  REQUIRE(f.loader->wait_started(1));

  auto step = [&] { f.time->advance(1s); };
  REQUIRE(f.rt->ensure_loaded("promoted").get());  // proactive, oldest use
  step();
  REQUIRE(f.rt->ensure_loaded("p_old").get());
  step();
  REQUIRE(f.rt->ensure_loaded("p_new").get());
  step();
  REQUIRE(f.rt->ensure_loaded("cancelled").get());
  step();
  std::atomic<int> answered{0};
  auto count = [&](expected<infer_result> r) {
    CHECK(r);
    ++answered;
  };
  f.rt->infer({"w1", {test::input()}}, count);
  step();
  f.rt->infer({"w2", {test::input()}}, count);
  step();
  f.rt->infer({"promoted", {test::input()}},
              count);  // a request promotes the queued proactive load
  REQUIRE(f.rt->unregister_model("cancelled").get());  // unregistering cancels its queued load

  auto queue = [&] {
    auto snapshot = f.rt->inspect().get();
    std::vector<std::string> order;
    for (auto& q : snapshot->queue)
      order.push_back(q.model + (q.waiting ? "*" : ""));
    return order;
  };
  REQUIRE(eventually([&] { return queue().size() == 5; }));
  CHECK(queue() == std::vector<std::string>{"w1*", "w2*", "promoted*", "p_new", "p_old"});

  f.loader->open_gate();
  REQUIRE(eventually([&] { return answered == 3; }));
  REQUIRE(eventually([&] { return f.loader->started().size() == 6; }));
  CHECK(f.loader->started() ==
        std::vector<std::string>{"blocker", "w1", "w2", "promoted", "p_new", "p_old"});
  CHECK(f.loader->loads_of("cancelled") == 0);
}

TEST_CASE("a queued load shows how many requests wait on it") {
  test::runtime_fixture f({"blocker", "cold", "background"}, {"host:64KiB"}, 1);
  f.register_all();
  f.loader->hold();
  REQUIRE(f.rt->ensure_loaded("blocker").get());  // occupies the only load slot
  REQUIRE(f.loader->wait_started(1));
  REQUIRE(f.rt->ensure_loaded("background").get());  // proactive: nobody waits on it

  std::atomic<int> answered{0};
  for (int i = 0; i < 3; ++i)
    f.rt->infer({"cold", {test::input()}}, [&](expected<infer_result> r) {
      CHECK(r);
      ++answered;
    });
  f.rt->ensure_loaded("cold", true, [&](expected<void> r) {
    CHECK(r);
    ++answered;
  });

  auto waiters = [&] {
    auto snapshot = f.rt->inspect().get();
    std::vector<std::string> out;
    for (auto& q : snapshot->queue)
      out.push_back(q.model + "=" + std::to_string(q.waiters));
    return out;
  };
  REQUIRE(eventually([&] {
    return waiters() == std::vector<std::string>{"cold=4", "background=0"};
  }));

  f.loader->open_gate();
  REQUIRE(eventually([&] { return answered == 4; }));
  CHECK(eventually([&] { return f.rt->inspect().get()->queue.empty(); }));
}

TEST_CASE("at most max_concurrent_loads loads run at once") {
  test::runtime_fixture f({"a", "b", "c", "d", "e"}, {"host:64KiB"}, 2);
  f.loader->hold();
  f.register_all(true);
  REQUIRE(f.loader->wait_started(2));
  REQUIRE(eventually([&] { return f.rt->inspect().get()->queue.size() == 3; }));
  auto snapshot = f.rt->inspect().get();
  REQUIRE(snapshot);
  CHECK(snapshot->running.size() == 2);
  CHECK(snapshot->queue.size() == 3);
  CHECK(f.loader->started().size() == 2);
  f.loader->open_gate();
  REQUIRE(eventually([&] {
    for (auto& m : f.names)
      if (test::state_of(*f.rt, m) != model_state::loaded) return false;
    return true;
  }));
  CHECK(f.loader->started().size() == 5);
}

TEST_CASE("stopping the runtime answers every waiting request") {
  test::runtime_fixture f({"slow"});
  f.register_all();
  f.loader->hold();
  std::vector<std::future<expected<infer_result>>> waiting;
  for (int i = 0; i < 20; ++i)
    waiting.push_back(f.rt->infer({"slow", {test::input()}}));
  REQUIRE(f.loader->wait_started(1));
  // The load stays held until every waiter has its answer: stopping answers them without waiting
  // for the load. Only then is the load let through, so the stop (which joins the loader's
  // threads) can end. Were the answers to wait for the load, the opener would give up after 20 s
  // and the checks below would see successes.
  std::atomic<int> ready_before_open{0};
  std::thread opener([&] {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    for (auto& w : waiting)
      if (w.wait_until(deadline) == std::future_status::ready) ++ready_before_open;
    f.loader->open_gate();
  });
  f.stop();
  opener.join();
  CHECK(ready_before_open == 20);
  for (auto& w : waiting) {
    REQUIRE(w.wait_for(0s) == std::future_status::ready);
    auto r = w.get();  // never a broken promise
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::unavailable);
    CHECK_THAT(r.error().message, Catch::Contains("shutting down"));
  }
  CHECK(f.loader->loads_of("slow") == 1);
}
