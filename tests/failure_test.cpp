// Failure records: retries on other devices, fail-fast, expiry on a manual clock (nothing sleeps
// for a timer), as seen through warm::runtime.
#include <catch2/catch.hpp>

#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

namespace {

const std::vector<std::string> three_devices{"host.0:64KiB", "host.1:64KiB", "host.2:64KiB"};

void expire_in_60s(runtime_options& o) {
  o.failure_expiry = 60s;
}

}  // namespace

TEST_CASE("a failed load is retried at once on another device without a record") {
  test::runtime_fixture f({"f", "other"}, three_devices, 2, expire_in_60s);
  f.register_all();
  f.loader->fail("f", true, "host.0");
  f.loader->fail("f", true, "host.1");
  auto r = f.rt->infer({"f", {test::input()}}).get();
  REQUIRE(r);
  CHECK(f.loader->attempts() == std::vector<std::string>{"f@host.0", "f@host.1", "f@host.2"});
  auto st = f.rt->status("f").get();
  CHECK(st->state == model_state::loaded);
  CHECK(st->device == "host.2");

  // The load succeeded, so f's records are gone; the records never blocked other models.
  CHECK(f.rt->inspect().get()->failures.empty());
  REQUIRE(f.rt->infer({"other", {test::input()}}).get());
  CHECK(f.loader->attempts().back() == "other@host.0");
}

TEST_CASE("after max attempts the model is LOADING_FAILED and fails fast until a record expires") {
  test::runtime_fixture f({"g"}, {"host.0:64KiB", "host.1:64KiB", "host.2:64KiB", "host.3:64KiB"},
                          2, expire_in_60s);
  f.register_all();
  f.loader->fail("g");
  auto first = f.rt->infer({"g", {test::input()}}).get();
  REQUIRE_FALSE(first);
  CHECK(first.error().code == errc::load_failed);
  CHECK(first.error().message == "g: injected failure on host.2");  // the last attempt's error
  CHECK(f.loader->attempts().size() == 3);                          // at most 3 attempts in all

  auto st = f.rt->status("g").get();
  CHECK(st->state == model_state::loading_failed);
  REQUIRE(st->last_error);
  CHECK(st->last_error->message == "g: injected failure on host.2");
  CHECK(st->retry_in_seconds == Approx(60));
  auto snapshot = f.rt->inspect().get();
  REQUIRE(snapshot->failures.size() == 3);
  CHECK(snapshot->failures[0].model == "g");
  CHECK(snapshot->failures[0].device == "host.0");
  CHECK(snapshot->failures[0].expires_in_seconds == Approx(60));

  // host.3 has no record, but the model gave up: requests fail fast, no new load.
  f.time->advance(30s);
  auto fast = f.rt->infer({"g", {test::input()}}).get();
  REQUIRE_FALSE(fast);
  CHECK(fast.error().message == "g: injected failure on host.2");
  CHECK_FALSE(f.rt->ensure_loaded("g", true).get());
  CHECK(f.loader->attempts().size() == 3);

  // Storage comes back; once a record expires the next request loads again.
  f.loader->fail("g", false);
  f.time->advance(31s);
  auto again = f.rt->infer({"g", {test::input()}}).get();
  REQUIRE(again);
  CHECK(f.loader->attempts().size() == 4);
  CHECK(test::state_of(*f.rt, "g") == model_state::loaded);
  CHECK(f.rt->inspect().get()->failures.empty());  // success clears the model's records
}

TEST_CASE("with one device a failure is final at once and expires on the manual clock") {
  test::runtime_fixture f({"h"}, {"host:64KiB"}, 2, expire_in_60s);
  f.register_all();
  f.loader->fail("h");
  CHECK_FALSE(f.rt->infer({"h", {test::input()}}).get());
  CHECK(f.loader->loads_of("h") == 1);
  f.loader->fail("h", false);
  f.time->advance(59s);
  CHECK_FALSE(f.rt->infer({"h", {test::input()}}).get());
  CHECK(f.loader->loads_of("h") == 1);
  f.time->advance(1s);
  CHECK(f.rt->infer({"h", {test::input()}}).get());
  CHECK(f.loader->loads_of("h") == 2);
}

TEST_CASE("unregistering a failed model forgets its records: registered again, it loads at once") {
  test::runtime_fixture f({"h"}, {"host:64KiB"}, 2, expire_in_60s);
  f.register_all();
  f.loader->fail("h");
  CHECK_FALSE(f.rt->infer({"h", {test::input()}}).get());
  REQUIRE(test::state_of(*f.rt, "h") == model_state::loading_failed);
  REQUIRE(f.rt->inspect().get()->failures.size() == 1);

  REQUIRE(f.rt->unregister_model("h").get());  // no load is pending: only records to forget
  REQUIRE(eventually([&] { return f.rt->inspect().get()->failures.empty(); }));
  f.loader->fail("h", false);
  REQUIRE(f.rt->register_model("h", {"h"}).get());
  auto served = f.rt->infer({"h", {test::input()}}).get();  // the clock has not moved
  REQUIRE(served);
  CHECK(f.loader->loads_of("h") == 2);
}

TEST_CASE("a file that became unreadable fails the load with a clear error, leaking nothing") {
  test::runtime_fixture f({"gone"}, {"host:64KiB"});
  f.register_all();
  std::filesystem::remove(f.dir / "repo/gone/1/model.safetensors");
  auto r = f.rt->infer({"gone", {test::input()}}).get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::load_failed);
  CHECK(f.rt->devices()[0]->used() == 0);
}

TEST_CASE(
    "retry forgets a model's failures: its next use loads at once, without waiting for expiry") {
  test::runtime_fixture f({"h", "other"}, {"host.0:64KiB", "host.1:64KiB"}, 2, expire_in_60s);
  f.register_all();
  f.loader->fail("h");
  CHECK_FALSE(f.rt->infer({"h", {test::input()}}).get());
  REQUIRE(test::state_of(*f.rt, "h") == model_state::loading_failed);
  const auto loads = f.loader->loads_of("h");
  f.loader->fail("h", false);  // the cause is fixed, the records stand: still failing fast
  CHECK_FALSE(f.rt->infer({"h", {test::input()}}).get());
  CHECK(f.loader->loads_of("h") == loads);

  REQUIRE(f.rt->retry("h").get());
  CHECK(test::state_of(*f.rt, "h") == model_state::not_loaded);
  CHECK(f.rt->inspect().get()->failures.empty());
  REQUIRE(f.rt->infer({"h", {test::input()}}).get());  // the clock has not moved
  CHECK(f.loader->loads_of("h") == loads + 1);

  // A model that never failed, or was never used, is retried as a no-op; an unknown id is
  // not_found.
  REQUIRE(f.rt->retry("h").get());
  REQUIRE(f.rt->retry("other").get());
  CHECK(test::state_of(*f.rt, "h") == model_state::loaded);
  auto unknown = f.rt->retry("nope").get();
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == errc::not_found);
}
