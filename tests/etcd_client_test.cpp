// warm::etcd::client against a real etcd (tests/support/etcd_member.hpp): keys, compare-and-set
// (and two threads racing it), leases expiring, kept alive and revoked, watches (live, replayed,
// compacted, cancelled), etcd crashing, hanging and coming back under a running client, and
// failover past dead and hung endpoints; and a secured etcd (https with client certificates,
// etcd's authentication): the right and wrong CA, no client certificate, users and passwords,
// a wrong password, a user's limits, tokens expiring, and a certificate's CN as the user.
// Skipped (77) without an etcd executable.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "etcd/client.hpp"
#include "support/etcd_member.hpp"
#include "support/round_barrier.hpp"

namespace {

using namespace std::chrono_literals;
using warm::errc;
using warm::etcd::client;
using warm::etcd::key_value;
using warm::etcd::watch_event;
using warm::etcd::watch_update;
using warm::test::etcd_member;
using warm::test::etcd_member_options;
using steady = std::chrono::steady_clock;

// Without etcd there is nothing to test: exit 77 (skipped) before Catch2's main runs.
[[maybe_unused]] const bool etcd_present = [] {
  if (etcd_member::executable().empty()) {
    std::fprintf(stderr, "etcd_client_test: no etcd executable (/usr/bin/etcd or $ETCD)\n");
    std::_Exit(77);
  }
  return true;
}();

// One member for the cases that do not stop it, started on first use.
etcd_member& shared_member() {
  static etcd_member member;
  if (!member.running()) {
    auto started = member.start();
    INFO((started ? std::string() : started.error().to_string()));
    REQUIRE(started);
  }
  return member;
}

std::unique_ptr<client> connect(std::vector<std::string> endpoints,
                                std::chrono::milliseconds timeout = 2000ms,
                                std::int64_t page_size = 1000) {
  warm::etcd::options o;
  o.endpoints = std::move(endpoints);
  o.timeout = timeout;
  o.page_size = page_size;
  auto c = client::connect(o);
  INFO((c ? std::string() : c.error().to_string()));
  REQUIRE(c);
  return std::move(*c);
}

template <class T>
T ok(warm::expected<T> r) {
  INFO((r ? std::string() : r.error().to_string()));
  REQUIRE(r);
  return std::move(*r);
}

void ok(warm::expected<void> r) {
  INFO((r ? std::string() : r.error().to_string()));
  REQUIRE(r);
}

// "ok" or the error's code, for checks that must not assert when a call unexpectedly succeeds.
template <class T>
std::string code_of(const warm::expected<T>& r) {
  return r ? "ok" : std::string(warm::to_string(r.error().code));
}

long long ms_since(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

// Runs `call` on a thread of its own and waits at most `bound` for it, so that a call that
// outlives its deadline fails the test instead of hanging it; `unstick` (resuming or restarting
// etcd) then lets the stuck call end before the test fails.
template <class F>
auto within(std::chrono::milliseconds bound, F call, const std::function<void()>& unstick)
    -> decltype(call()) {
  auto f = std::async(std::launch::async, std::move(call));
  if (f.wait_for(bound) != std::future_status::ready) {
    unstick();
    f.wait();
    FAIL("a call did not return within " << bound.count() << " ms");
  }
  return f.get();
}

// What a watch delivered, for the test thread to wait on.
struct recorder {
  std::mutex m;
  std::condition_variable cv;
  std::vector<watch_event> events;
  std::vector<warm::error> errors;
  std::int64_t compact_revision = 0;
  int updates = 0;

  warm::etcd::watch_callback callback() {
    return [this](const watch_update& u) {
      std::lock_guard<std::mutex> lock(m);
      ++updates;
      for (const auto& e : u.events)
        events.push_back(e);
      if (u.error) {
        errors.push_back(*u.error);
        compact_revision = u.compact_revision;
      }
      cv.notify_all();
    };
  }
  bool wait_events(std::size_t n, std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, limit, [&] { return events.size() >= n; });
  }
  bool wait_error(std::chrono::milliseconds limit = 5000ms) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, limit, [&] { return !errors.empty(); });
  }
  std::vector<watch_event> snapshot() {
    std::lock_guard<std::mutex> lock(m);
    return events;
  }
};

}  // namespace

TEST_CASE("prefix_end is the first key after a prefix") {
  using warm::etcd::prefix_end;
  CHECK(prefix_end("a/") == "a0");
  CHECK(prefix_end("a") == "b");
  CHECK(prefix_end(std::string("a\xff", 2)) == "b");
  CHECK(prefix_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
  CHECK(prefix_end("") == std::string(1, '\0'));
}

TEST_CASE("connect refuses bad options without touching the network") {
  warm::etcd::options o;
  CHECK(code_of(client::connect(o)) == "invalid_argument");  // no endpoints
  for (std::string bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "host:12x",
                          "unix:///tmp/sock", "::1:2379", "https://127.0.0.1", "grpc://h:1"}) {
    o.endpoints = {bad};
    auto c = client::connect(o);
    INFO(bad);
    REQUIRE_FALSE(c);
    CHECK(c.error().code == errc::invalid_argument);
    CHECK(c.error().message.find(bad) != std::string::npos);
  }
  o.endpoints = {"127.0.0.1:2379", "http://[::1]:2379", "http://localhost:2379/"};
  CHECK(client::connect(o));
  o.timeout = 0ms;
  CHECK(code_of(client::connect(o)) == "invalid_argument");
  o.timeout = 2000ms;
  o.keepalive = 1000ms;
  CHECK(code_of(client::connect(o)) == "invalid_argument");
}

TEST_CASE("put, get, get_prefix and erase round-trip; revisions increase") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()});
  const std::string p = "/kv/";

  CHECK_FALSE(ok(c->get(p + "a")).has_value());
  const auto r1 = ok(c->put(p + "a", "1"));
  CHECK(r1 > 0);
  auto a = ok(c->get(p + "a"));
  REQUIRE(a);
  CHECK(a->key == p + "a");
  CHECK(a->value == "1");
  CHECK(a->create_revision == r1);
  CHECK(a->mod_revision == r1);
  CHECK(a->version == 1);
  CHECK(a->lease == 0);

  const auto r2 = ok(c->put(p + "a", "2"));
  CHECK(r2 > r1);
  a = ok(c->get(p + "a"));
  REQUIRE(a);
  CHECK(a->value == "2");
  CHECK(a->create_revision == r1);
  CHECK(a->mod_revision == r2);
  CHECK(a->version == 2);

  const auto r3 = ok(c->put(p + "c", "3"));
  const auto r4 = ok(c->put(p + "b", "4"));
  CHECK(r3 > r2);
  CHECK(r4 > r3);
  ok(c->put("/kv0", "outside"));  // just past the prefix: prefix_end("/kv/") is "/kv0"
  ok(c->put("/kv", "outside"));

  auto listing = ok(c->get_prefix(p));
  REQUIRE(listing.kvs.size() == 3);
  CHECK(listing.kvs[0].key == p + "a");
  CHECK(listing.kvs[1].key == p + "b");
  CHECK(listing.kvs[2].key == p + "c");
  CHECK(listing.kvs[1].value == "4");
  CHECK(listing.kvs[1].mod_revision == r4);
  CHECK(listing.revision > r4);  // the two puts outside came after

  // Bytes, not text: NUL and 0xff in keys and values.
  const std::string key = p + std::string("x\0\xffy", 4), value("\0\x01\xff", 3);
  ok(c->put(key, value));
  auto x = ok(c->get(key));
  REQUIRE(x);
  CHECK(x->key == key);
  CHECK(x->value == value);

  auto gone = ok(c->erase(p + "a"));
  CHECK(gone.deleted == 1);
  CHECK(gone.revision > listing.revision);
  CHECK_FALSE(ok(c->get(p + "a")).has_value());
  CHECK(ok(c->erase(p + "a")).deleted == 0);

  CHECK(ok(c->erase_prefix(p)).deleted == 3);
  CHECK(ok(c->get_prefix(p)).kvs.empty());
  CHECK(ok(c->get("/kv0")).has_value());
  CHECK(ok(c->get("/kv")).has_value());

  CHECK(code_of(c->get("")) == "invalid_argument");
  CHECK(code_of(c->put("", "v")) == "invalid_argument");
  CHECK(code_of(c->erase_prefix("")) == "invalid_argument");
}

TEST_CASE("get_prefix reads a large prefix in pages, at one revision") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()}, 2000ms, 3);  // pages of 3 keys
  const std::string p = "/pages/";
  for (int i = 0; i < 10; ++i)
    ok(c->put(p + std::to_string(i), "v" + std::to_string(i)));
  auto listing = ok(c->get_prefix(p));
  REQUIRE(listing.kvs.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CHECK(listing.kvs[static_cast<std::size_t>(i)].key == p + std::to_string(i));
    CHECK(listing.kvs[static_cast<std::size_t>(i)].mod_revision <= listing.revision);
  }
  // Every key written after the listing's revision is absent from the listing.
  auto later = ok(c->put(p + "5", "changed"));
  CHECK(later > listing.revision);
  CHECK(listing.kvs[5].value == "v5");
}

TEST_CASE("put_if: create-only once, then only against the current mod_revision") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()});
  const std::string k = "/cas/key";

  auto first = ok(c->put_if(k, "v1", 0));
  REQUIRE(first.succeeded);
  CHECK_FALSE(first.current);
  const auto r1 = first.revision;
  auto now = ok(c->get(k));
  REQUIRE(now);
  CHECK(now->mod_revision == r1);

  // A second create loses and sees the winner.
  auto second = ok(c->put_if(k, "v2", 0));
  CHECK_FALSE(second.succeeded);
  REQUIRE(second.current);
  CHECK(second.current->value == "v1");
  CHECK(second.current->mod_revision == r1);
  CHECK(ok(c->get(k))->value == "v1");

  // An update against the current revision wins; so the one against r1 is stale afterwards.
  auto update = ok(c->put_if(k, "v3", r1));
  REQUIRE(update.succeeded);
  const auto r3 = update.revision;
  CHECK(r3 > r1);
  CHECK(ok(c->get(k))->mod_revision == r3);
  auto stale = ok(c->put_if(k, "v4", r1));  // r1 is still the key's create_revision
  CHECK_FALSE(stale.succeeded);
  REQUIRE(stale.current);
  CHECK(stale.current->value == "v3");
  CHECK(stale.current->mod_revision == r3);
  CHECK(stale.current->create_revision == r1);

  // erase_if, the same way.
  auto stale_erase = ok(c->erase_if(k, r1));
  CHECK_FALSE(stale_erase.succeeded);
  REQUIRE(stale_erase.current);
  CHECK(stale_erase.current->mod_revision == r3);
  CHECK(ok(c->get(k)).has_value());
  auto erased = ok(c->erase_if(k, r3));
  CHECK(erased.succeeded);
  CHECK_FALSE(ok(c->get(k)).has_value());
  auto again = ok(c->erase_if(k, r3));
  CHECK_FALSE(again.succeeded);
  CHECK_FALSE(again.current);  // it no longer exists

  // Updating a key that does not exist never succeeds; creating it again does.
  CHECK_FALSE(ok(c->put_if(k, "v5", r3)).succeeded);
  CHECK(ok(c->put_if(k, "v6", 0)).succeeded);

  CHECK(code_of(c->put_if(k, "v", -1)) == "invalid_argument");
  CHECK(code_of(c->erase_if(k, 0)) == "invalid_argument");
}

TEST_CASE("two threads racing put_if on one key: exactly one wins") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()});  // one client, used by both threads at once
  warm::test::round_barrier barrier;
  constexpr int rounds = 40;
  std::vector<warm::etcd::cas_result> a(rounds), b(rounds);
  std::vector<std::int64_t> expected(rounds, 0);
  std::vector<std::string> failures;
  std::mutex failures_m;
  // Odd rounds create the key; even rounds update it against the revision it was made at.
  for (int i = 0; i < rounds; ++i) {
    const std::string k = "/race/" + std::to_string(i);
    if (i % 2 == 0) expected[static_cast<std::size_t>(i)] = ok(c->put(k, "seed"));
  }
  auto racer = [&](std::vector<warm::etcd::cas_result>& out, const std::string& value) {
    for (int i = 0; i < rounds; ++i) {
      barrier.arrive_and_wait();
      auto r =
          c->put_if("/race/" + std::to_string(i), value, expected[static_cast<std::size_t>(i)]);
      if (r) {
        out[static_cast<std::size_t>(i)] = *r;
      } else {
        std::lock_guard<std::mutex> lock(failures_m);
        failures.push_back(r.error().to_string());
      }
    }
  };
  std::thread ta(racer, std::ref(a), "A");
  std::thread tb(racer, std::ref(b), "B");
  ta.join();
  tb.join();
  INFO((failures.empty() ? std::string() : failures.front()));
  REQUIRE(failures.empty());
  for (int i = 0; i < rounds; ++i) {
    const auto& x = a[static_cast<std::size_t>(i)];
    const auto& y = b[static_cast<std::size_t>(i)];
    INFO("round " << i);
    REQUIRE(x.succeeded != y.succeeded);
    const auto& winner = x.succeeded ? x : y;
    const auto& loser = x.succeeded ? y : x;
    const std::string won = x.succeeded ? "A" : "B";
    REQUIRE(loser.current);
    CHECK(loser.current->value == won);
    CHECK(loser.current->mod_revision == winner.revision);
    CHECK(ok(c->get("/race/" + std::to_string(i)))->value == won);
  }
}

TEST_CASE("leases: expiry deletes the key, keep_alive_once keeps it, revoke deletes it at once") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()});
  auto dying = ok(c->grant_lease(1));
  auto kept = ok(c->grant_lease(1));
  CHECK(dying.id != 0);
  CHECK(dying.id != kept.id);
  CHECK(dying.ttl_seconds >= 1);  // etcd raises it to its minimum (2 s with default timing)
  ok(c->put("/lease/dying", "x", dying.id));
  ok(c->put("/lease/kept", "y", kept.id));
  auto kv = ok(c->get("/lease/kept"));
  REQUIRE(kv);
  CHECK(kv->lease == kept.id);
  // A transaction's writes carry their own leases.
  auto txn =
      ok(c->transact({{"/lease/txn-kept", 0}}, {{"/lease/txn-kept", std::string("t"), kept.id},
                                                {"/lease/txn-none", std::string("u"), 0}}));
  REQUIRE(txn.succeeded);
  auto in_txn = ok(c->get("/lease/txn-kept"));
  REQUIRE(in_txn);
  CHECK(in_txn->lease == kept.id);
  CHECK(ok(c->get("/lease/txn-none"))->lease == 0);
  CHECK(ok(c->time_to_live(kept.id)) > 0);

  // Renew one lease every 300 ms for well past both TTLs; the other is left to expire.
  const auto start = steady::now();
  const auto span = std::chrono::seconds(dying.ttl_seconds + 3);
  long long dying_gone_at = -1;
  while (steady::now() - start < span) {
    CHECK(ok(c->keep_alive_once(kept.id)) > 0);
    if (dying_gone_at < 0 && !ok(c->get("/lease/dying"))) dying_gone_at = ms_since(start);
    REQUIRE(ok(c->get("/lease/kept")).has_value());
    std::this_thread::sleep_for(300ms);
  }
  INFO("the unrenewed key went after " << dying_gone_at << " ms");
  CHECK(dying_gone_at >= 0);
  CHECK(dying_gone_at >= (dying.ttl_seconds - 1) * 1000);  // not long before its TTL
  CHECK(ok(c->keep_alive_once(dying.id)) == 0);            // expired
  CHECK(ok(c->time_to_live(dying.id)) == 0);

  // Revoking deletes the key at once: the very next read misses it.
  ok(c->revoke_lease(kept.id));
  CHECK_FALSE(ok(c->get("/lease/kept")).has_value());
  CHECK_FALSE(ok(c->get("/lease/txn-kept")).has_value());
  CHECK(ok(c->get("/lease/txn-none")).has_value());
  CHECK(ok(c->keep_alive_once(kept.id)) == 0);
  CHECK(code_of(c->revoke_lease(kept.id)) == "not_found");
  CHECK(code_of(c->put("/lease/none", "z", kept.id)) == "not_found");
  CHECK(code_of(c->grant_lease(0)) == "invalid_argument");
}

TEST_CASE("watch: puts and deletes in order with their revisions; history replays") {
  auto& m = shared_member();
  auto c = connect({m.endpoint()});
  const std::string p = "/watch/";
  recorder live;
  auto w = ok(c->watch(p, 0, live.callback()));
  const auto r1 = ok(c->put(p + "a", "1"));
  const auto r2 = ok(c->put(p + "b", "2"));
  ok(c->put("/watch0", "outside"));
  const auto r3 = ok(c->erase(p + "a")).revision;
  const auto r4 = ok(c->put(p + "a", "3"));
  auto cas = ok(c->put_if(p + "b", "5", r2));
  REQUIRE(cas.succeeded);
  const auto r5 = cas.revision;

  REQUIRE(live.wait_events(5));
  std::this_thread::sleep_for(100ms);  // nothing else may arrive (the key outside the prefix)
  auto events = live.snapshot();
  REQUIRE(events.size() == 5);
  using kind = watch_event::kind;
  struct expect {
    kind type;
    std::string key, value;
    std::int64_t revision;
  };
  const std::vector<expect> want{{kind::put, p + "a", "1", r1},
                                 {kind::put, p + "b", "2", r2},
                                 {kind::erase, p + "a", "", r3},
                                 {kind::put, p + "a", "3", r4},
                                 {kind::put, p + "b", "5", r5}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("event " << i);
    CHECK(events[i].type == want[i].type);
    CHECK(events[i].kv.key == want[i].key);
    CHECK(events[i].kv.value == want[i].value);
    CHECK(events[i].kv.mod_revision == want[i].revision);
  }
  CHECK(events[3].kv.create_revision == r4);  // re-created after the delete
  CHECK(events[4].kv.version == 2);
  CHECK_FALSE(w->stopped());

  // A second watch from r2 replays the history from there, then goes on live.
  recorder replay;
  auto w2 = ok(c->watch(p, r2, replay.callback()));
  REQUIRE(replay.wait_events(4));
  auto old = replay.snapshot();
  CHECK(old[0].kv.mod_revision == r2);
  CHECK(old[1].type == kind::erase);
  CHECK(old[1].kv.mod_revision == r3);
  CHECK(old[3].kv.mod_revision == r5);
  const auto r6 = ok(c->put(p + "c", "6"));
  REQUIRE(replay.wait_events(5));
  CHECK(replay.snapshot()[4].kv.mod_revision == r6);

  // Destroying a watcher returns promptly, and its callback is not called afterwards.
  const auto t = steady::now();
  w.reset();
  CHECK(ms_since(t) < 1000);
  const auto updates = live.updates;
  ok(c->put(p + "d", "7"));
  REQUIRE(replay.wait_events(6));  // the other watch saw it, so it was sent
  std::this_thread::sleep_for(100ms);
  {
    std::lock_guard<std::mutex> lock(live.m);
    CHECK(live.updates == updates);
    CHECK(live.errors.empty());
  }
  const auto t2 = steady::now();
  w2.reset();
  CHECK(ms_since(t2) < 1000);

  CHECK(code_of(c->watch(p, -1, live.callback())) == "invalid_argument");
  CHECK(code_of(c->watch(p, 0, nullptr)) == "invalid_argument");
}

TEST_CASE("a watch from a compacted revision ends with compact_revision set") {
  const char* etcdctl = "/usr/bin/etcdctl";
  if (::access(etcdctl, X_OK) != 0) {
    WARN("no etcdctl: compaction not tested");
    return;
  }
  etcd_member m;  // its own member: compaction would take history from the other cases
  auto started = m.start();
  INFO((started ? std::string() : started.error().to_string()));
  REQUIRE(started);
  auto c = connect({m.endpoint()});
  const auto r1 = ok(c->put("/compact/a", "1"));
  ok(c->put("/compact/a", "2"));
  const auto r3 = ok(c->put("/compact/a", "3"));
  const std::string command = "ETCDCTL_API=3 " + std::string(etcdctl) + " --endpoints " +
                              m.host_port() + " compact " + std::to_string(r3) + " >/dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  recorder r;
  auto w = c->watch("/compact/", r1, r.callback());
  REQUIRE(w);  // etcd confirms the watch, then cancels it
  REQUIRE(r.wait_error());
  std::lock_guard<std::mutex> lock(r.m);
  CHECK(r.errors.front().code == errc::not_found);
  CHECK(r.compact_revision == r3);
  CHECK(r.events.empty());
  CHECK((*w)->stopped());
}

TEST_CASE("etcd down: unavailable within the deadline; back on the same client after restart") {
  etcd_member m;
  auto started = m.start();
  INFO((started ? std::string() : started.error().to_string()));
  REQUIRE(started);
  const auto timeout = 1000ms;
  const auto bound = timeout + 1500ms;
  auto c = connect({m.endpoint()}, timeout);
  ok(c->put("/down/a", "1"));
  recorder r;
  auto w = ok(c->watch("/down/", 0, r.callback()));

  m.kill();
  // The watch reports the broken stream, once, and stops; no spinning, no crash.
  REQUIRE(r.wait_error());
  {
    std::lock_guard<std::mutex> lock(r.m);
    CHECK(r.errors.front().code == errc::unavailable);
  }
  CHECK(w->stopped());
  std::this_thread::sleep_for(200ms);
  {
    std::lock_guard<std::mutex> lock(r.m);
    CHECK(r.errors.size() == 1);
  }

  // Each call on a thread of its own (within()), so that a missing deadline fails the test
  // instead of hanging it; a stuck call is freed by bringing etcd back.
  auto bounded = [&](auto call) { return within(bound, call, [&] { (void)m.start(); }); };
  auto got = bounded([&] { return c->get("/down/a"); });
  REQUIRE_FALSE(got);
  CHECK(got.error().code == errc::unavailable);
  CHECK(got.error().message.find(m.endpoint()) != std::string::npos);
  auto put = bounded([&] { return c->put("/down/b", "2"); });
  REQUIRE_FALSE(put);
  CHECK(put.error().code == errc::unavailable);
  auto lost_watch = bounded([&] { return c->watch("/down/", 0, r.callback()); });
  REQUIRE_FALSE(lost_watch);
  CHECK(lost_watch.error().code == errc::unavailable);
  auto ka = bounded([&] { return c->keep_alive_once(1); });
  REQUIRE_FALSE(ka);
  CHECK(ka.error().code == errc::unavailable);

  // The same client (and its channel) serves again once etcd is back on its ports and data.
  started = m.start();
  INFO((started ? std::string() : started.error().to_string()));
  REQUIRE(started);
  const auto t = steady::now();
  auto back = c->get("/down/a");
  INFO("first call after restart: " << (back ? std::string("ok") : back.error().to_string()));
  CHECK(back);  // within one call's deadline, reconnecting included
  while (!back && ms_since(t) < 5000)
    back = c->get("/down/a");
  REQUIRE(back);
  REQUIRE(*back);
  CHECK((*back)->value == "1");  // the data survived the crash
  recorder again;
  auto w2 = ok(c->watch("/down/", 0, again.callback()));
  ok(c->put("/down/c", "3"));
  CHECK(again.wait_events(1));
}

TEST_CASE("etcd hung: calls end at their deadline (timeout), then work once it resumes") {
  etcd_member m;
  auto started = m.start();
  INFO((started ? std::string() : started.error().to_string()));
  REQUIRE(started);
  const auto timeout = 1000ms;
  const auto bound = timeout + 1500ms;
  auto c = connect({m.endpoint()}, timeout);
  ok(c->put("/hung/a", "1"));

  m.pause();  // connections stay open; nothing answers
  // Each call on a thread of its own (within()), so that a missing deadline fails the test
  // instead of hanging it; a stuck call is freed by resuming etcd.
  auto bounded = [&](auto call) { return within(bound, call, [&] { m.resume(); }); };
  auto got = bounded([&] { return c->get("/hung/a"); });
  REQUIRE_FALSE(got);
  CHECK(got.error().code == errc::timeout);
  auto put = bounded([&] { return c->put("/hung/b", "2"); });
  REQUIRE_FALSE(put);
  CHECK(put.error().code == errc::timeout);  // the write's outcome is unknown
  auto ka = bounded([&] { return c->keep_alive_once(1); });
  REQUIRE_FALSE(ka);
  auto w = bounded([&] { return c->watch("/hung/", 0, [](const watch_update&) {}); });
  REQUIRE_FALSE(w);

  m.resume();
  auto back = ok(c->get("/hung/a"));
  REQUIRE(back);
  CHECK(back->value == "1");
}

TEST_CASE("failover: a dead endpoint and a hung one are passed over for a live one") {
  auto& live = shared_member();
  const std::string dead = "127.0.0.1:" + std::to_string(etcd_member::free_port());

  SECTION("dead first") {
    auto c = connect({dead, live.endpoint()});
    const auto t = steady::now();
    const auto rev = ok(c->put("/failover/a", "1"));
    CHECK(ms_since(t) < 2000);
    CHECK(ok(c->get("/failover/a"))->mod_revision == rev);
    recorder r;
    auto w = ok(c->watch("/failover/", 0, r.callback()));
    ok(c->put("/failover/b", "2"));
    CHECK(r.wait_events(1));
    // Every endpoint dead: the message names each.
    auto none = connect({dead, "127.0.0.1:" + std::to_string(etcd_member::free_port())}, 500ms);
    auto e = none->get("/failover/a");
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::unavailable);
    CHECK(e.error().message.find(dead) != std::string::npos);
    CHECK(e.error().message.find(none->endpoints()[1]) != std::string::npos);
  }

  SECTION("hung first") {
    etcd_member hung;
    auto started = hung.start();
    INFO((started ? std::string() : started.error().to_string()));
    REQUIRE(started);
    ok(connect({live.endpoint()})->put("/failover/h", "1"));
    // A client connected to `hung` before it hangs, and preferring it (it answered last; its own
    // store, a cluster apart from `live`'s, has no such key).
    auto before = connect({hung.endpoint(), live.endpoint()});
    CHECK_FALSE(ok(before->get("/failover/h")));
    hung.pause();
    auto c = connect({hung.endpoint(), live.endpoint()});
    // The read goes to `hung` first, which takes the connection and never answers; after its
    // share of the deadline the read goes on to the live member.
    auto t = steady::now();
    auto got = ok(c->get("/failover/h"));
    CHECK(ms_since(t) < 2000 + 1500);
    REQUIRE(got);
    CHECK(got->value == "1");
    // The live endpoint is preferred now: the next calls go there first, at once.
    t = steady::now();
    ok(c->put("/failover/h", "2"));
    ok(c->get("/failover/h"));
    CHECK(ms_since(t) < 900);
    // A write fails over too: the request never left the client, since `hung` never completed
    // a connection.
    auto w = connect({hung.endpoint(), live.endpoint()});
    t = steady::now();
    const auto rev = ok(w->put("/failover/h", "3"));
    CHECK(ms_since(t) < 2000 + 1500);
    CHECK(ok(c->get("/failover/h"))->mod_revision == rev);

    // A write sent over `before`'s open connection to `hung` gets no answer: it may yet be
    // applied there, so it is not sent to another endpoint: timeout, and `live` never saw it.
    auto late = within(
        3500ms, [&] { return before->put("/failover/late", "x"); }, [&] { hung.resume(); });
    REQUIRE_FALSE(late);
    CHECK(late.error().code == errc::timeout);
    CHECK_FALSE(ok(c->get("/failover/late")));
    // A read on that client moves on to `live`, which it prefers from then on.
    auto read = within(
        3500ms, [&] { return before->get("/failover/h"); }, [&] { hung.resume(); });
    REQUIRE(ok(std::move(read)));
    t = steady::now();
    ok(before->put("/failover/h", "4"));
    CHECK(ms_since(t) < 900);
    hung.resume();
  }
}

// ---- a secured etcd
// ------------------------------------------------------------------------------

namespace {

const std::string root_password = "root-Pa55word";
const std::string alice_password = "alice-Pa55word";

// One secured member for the cases below (started on first use): https only, client
// certificates required (--client-cert-auth), authentication on, and tokens that expire 1 s after
// their last use (--auth-token-ttl 1), so that any pause of a second makes a client renew its
// token. Users: root (every key; password root_password) and alice (keys under /a/ only;
// alice_password), each with a client certificate whose CN is the name.
etcd_member& secured_member() {
  static etcd_member member(etcd_member_options{true, {"alice"}, {"--auth-token-ttl", "1"}});
  static bool ready = false;
  if (!ready) {
    auto started = member.start();
    INFO((started ? std::string() : started.error().to_string()));
    REQUIRE(started);
    auto on = member.enable_auth(root_password);
    INFO((on ? std::string() : on.error().to_string()));
    REQUIRE(on);
    auto added = member.add_user("alice", alice_password, "/a/");
    INFO((added ? std::string() : added.error().to_string()));
    REQUIRE(added);
    ready = true;
  }
  return member;
}

// Options for the secured member: its CA, `cert_user`'s client certificate (none when empty),
// and `user` with `password` when given.
warm::etcd::options secured_options(const etcd_member& m, const std::string& cert_user,
                                    const std::string& user = "",
                                    const std::string& password = "") {
  warm::etcd::options o;
  o.endpoints = {m.endpoint()};
  o.ca_file = m.ca_file();
  if (!cert_user.empty()) {
    o.cert_file = m.cert_file(cert_user);
    o.key_file = m.key_file(cert_user);
  }
  o.user = user;
  o.password = password;
  return o;
}

std::unique_ptr<client> connect(const warm::etcd::options& o) {
  auto c = client::connect(o);
  INFO((c ? std::string() : c.error().to_string()));
  REQUIRE(c);
  return std::move(*c);
}

// Puts, reads back, watches a put and keeps a lease alive under `prefix`: what a cluster
// instance does with etcd.
void use_keys_watch_and_lease(client& c, const std::string& prefix) {
  const auto rev = ok(c.put(prefix + "k", "v1"));
  auto kv = ok(c.get(prefix + "k"));
  REQUIRE(kv);
  CHECK(kv->value == "v1");
  CHECK(kv->mod_revision == rev);
  CHECK(ok(c.get_prefix(prefix)).kvs.size() >= 1);
  recorder seen;
  auto w = ok(c.watch(prefix, rev + 1, seen.callback()));
  ok(c.put(prefix + "k", "v2"));
  REQUIRE(seen.wait_events(1));
  CHECK(seen.snapshot()[0].kv.value == "v2");
  auto l = ok(c.grant_lease(5));
  ok(c.put(prefix + "leased", "x", l.id));
  CHECK(ok(c.keep_alive_once(l.id)) > 0);
  CHECK(ok(c.time_to_live(l.id)) > 0);
  auto cas = ok(c.put_if(prefix + "k", "v3", ok(c.get(prefix + "k"))->mod_revision));
  CHECK(cas.succeeded);
  ok(c.revoke_lease(l.id));
  CHECK_FALSE(ok(c.get(prefix + "leased")));
  CHECK(ok(c.erase(prefix + "k")).deleted == 1);
}

// Writes `text` to a new file under /tmp; removed by the destructor.
struct temp_file {
  std::string path;
  explicit temp_file(const std::string& text) {
    char name[] = "/tmp/warm-etcd-test-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
    path = name;
  }
  ~temp_file() { ::unlink(path.c_str()); }
};

}  // namespace

TEST_CASE("connect checks TLS and authentication options without touching the network") {
  const temp_file pem("-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n");
  const temp_file not_pem("hello\n");
  warm::etcd::options o;
  o.endpoints = {"https://127.0.0.1:2379", "https://[::1]:2379/"};
  CHECK(client::connect(o));  // https with the system's roots
  o.ca_file = pem.path;
  o.cert_file = pem.path;
  o.key_file = pem.path;
  CHECK(client::connect(o));
  auto refused = [&](const std::vector<std::string>& parts) {
    auto c = client::connect(o);
    REQUIRE_FALSE(c);
    CHECK(c.error().code == errc::invalid_argument);
    for (const auto& part : parts) {
      INFO(c.error().message << " should name " << part);
      CHECK(c.error().message.find(part) != std::string::npos);
    }
  };
  SECTION("http and https mixed") {
    o.endpoints = {"https://127.0.0.1:2379", "http://127.0.0.1:2380"};
    refused({"https://127.0.0.1:2379", "http://127.0.0.1:2380"});
    o.endpoints = {"https://127.0.0.1:2379", "127.0.0.1:2380"};
    refused({"127.0.0.1:2380"});
  }
  SECTION("a file that is missing or not PEM") {
    o.ca_file = "/nonexistent/ca.pem";
    refused({"ca_file", "/nonexistent/ca.pem"});
    o.ca_file = pem.path;
    o.key_file = not_pem.path;
    refused({"key_file", not_pem.path});
    o.key_file = pem.path;
    o.cert_file = "/nonexistent/cert.pem";
    refused({"cert_file", "/nonexistent/cert.pem"});
  }
  SECTION("a certificate without its key, or a key without its certificate") {
    o.key_file.clear();
    refused({"key_file"});
    o.key_file = pem.path;
    o.cert_file.clear();
    refused({"cert_file"});
  }
  SECTION("TLS files with http endpoints") {
    o.endpoints = {"http://127.0.0.1:2379"};
    refused({"https"});
  }
  SECTION("a user without a password, or a password without a user") {
    o.user = "root";
    refused({"password"});
    o.user.clear();
    o.password = "secret-password";
    auto c = client::connect(o);
    REQUIRE_FALSE(c);
    CHECK(c.error().message.find("secret-password") == std::string::npos);
  }
}

TEST_CASE("TLS with a client certificate: keys, watch and leases over https") {
  auto& m = secured_member();
  // root's certificate and no user: etcd takes the certificate's CN, root, as the user.
  auto c = connect(secured_options(m, "root"));
  use_keys_watch_and_lease(*c, "/tls/");
}

TEST_CASE("TLS: a CA that did not sign etcd's certificate fails, saying so, within the deadline") {
  auto& m = secured_member();
  auto o = secured_options(m, "root");
  o.ca_file = m.other_ca_file();
  o.timeout = 2000ms;
  auto c = connect(o);
  const auto t = steady::now();
  auto r = c->get("/tls/x");
  const auto took = ms_since(t);
  REQUIRE_FALSE(r);
  INFO(r.error().message << " (" << took << " ms)");
  CHECK(r.error().code == errc::unavailable);
  CHECK(r.error().message.find("TLS ") != std::string::npos);
  CHECK(took < 2000);
  auto w = c->watch("/tls/", 0, [](const watch_update&) {});
  REQUIRE_FALSE(w);
  CHECK(w.error().message.find("TLS ") != std::string::npos);
}

TEST_CASE("TLS: etcd refuses a client without a certificate (--client-cert-auth)") {
  auto& m = secured_member();
  auto o = secured_options(m, "", "root", root_password);
  o.timeout = 2000ms;
  auto c = connect(o);
  const auto t = steady::now();
  auto r = within(
      3500ms, [&] { return c->put("/tls/no-cert", "x"); }, [] {});
  const auto took = ms_since(t);
  REQUIRE_FALSE(r);
  INFO(r.error().message << " (" << took << " ms)");
  CHECK(r.error().code == errc::unavailable);
  CHECK(r.error().message.find("TLS failed") != std::string::npos);
  CHECK(r.error().message.find("client certificate") != std::string::npos);
  CHECK(r.error().message.find(m.endpoint()) != std::string::npos);
  CHECK(r.error().message.find(root_password) == std::string::npos);
  CHECK(took < 2000);
}

TEST_CASE("authentication: a user and password for keys, watch and leases") {
  auto& m = secured_member();
  // alice's certificate, limited to /a/, but root's token: every key is root's to use, watches
  // and keep-alives included, so the token rides on them.
  auto c = connect(secured_options(m, "alice", "root", root_password));
  use_keys_watch_and_lease(*c, "/b/");
  auto listing = ok(c->get_prefix("/b/"));
  CHECK(listing.revision > 0);
}

TEST_CASE("authentication: a wrong password is refused at once, without the password") {
  auto& m = secured_member();
  const std::string wrong = "wrong-Pa55word-123";
  auto c = connect(secured_options(m, "root", "root", wrong));
  const auto t = steady::now();
  auto r = c->put("/b/x", "x");
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().code == errc::invalid_argument);
  CHECK(r.error().message.find("etcd refused user 'root'") != std::string::npos);
  CHECK(r.error().message.find("authentication failed") != std::string::npos);
  CHECK(r.error().message.find(wrong) == std::string::npos);
  auto w = c->watch("/b/", 0, [](const watch_update&) {});
  REQUIRE_FALSE(w);
  CHECK(w.error().message.find("etcd refused user 'root'") != std::string::npos);
  CHECK(w.error().message.find(wrong) == std::string::npos);
  auto g = c->get("/b/x");
  REQUIRE_FALSE(g);
  CHECK(g.error().message.find(wrong) == std::string::npos);
  CHECK(ms_since(t) < 2000);  // three refusals, none waiting for the deadline
}

TEST_CASE("authentication: a user limited to /a/ is denied /b/x, naming the operation and key") {
  auto& m = secured_member();
  auto c = connect(secured_options(m, "root", "alice", alice_password));
  ok(c->put("/a/x", "mine"));
  CHECK(ok(c->get("/a/x"))->value == "mine");
  auto denied = [](const warm::error& e, const std::string& op) {
    INFO(e.message);
    CHECK(e.code == errc::invalid_argument);
    CHECK(e.message.find("permission denied") != std::string::npos);
    CHECK(e.message.find(op) != std::string::npos);
    CHECK(e.message.find(alice_password) == std::string::npos);
  };
  auto put = c->put("/b/x", "not mine");
  REQUIRE_FALSE(put);
  denied(put.error(), "put '/b/x'");
  auto get = c->get("/b/x");
  REQUIRE_FALSE(get);
  denied(get.error(), "get '/b/x'");
  auto w = c->watch("/b/", 0, [](const watch_update&) {});
  REQUIRE_FALSE(w);
  denied(w.error(), "watch '/b/'");
  ok(c->put("/a/y", "still mine"));  // the refusals cost nothing else
}

TEST_CASE("authentication: an expired token is renewed, for reads, writes, watches and leases") {
  auto& m = secured_member();  // tokens expire 1 s after their last use
  // A client per kind of call, each with a token that expires during the one pause.
  std::vector<std::unique_ptr<client>> c;
  for (int i = 0; i < 4; ++i) {
    c.push_back(connect(secured_options(m, "alice", "root", root_password)));
    ok(c.back()->put("/b/ttl", std::to_string(i)));
  }
  auto l = ok(c[0]->grant_lease(10));
  std::this_thread::sleep_for(2200ms);  // past the TTL and etcd's sweep of tokens each second
  ok(c[0]->put("/b/ttl", "4"));         // a write, sent again with a new token
  CHECK(ok(c[1]->get("/b/ttl"))->value == "4");
  CHECK(ok(c[2]->keep_alive_once(l.id)) > 0);
  recorder seen;
  auto w = ok(c[3]->watch("/b/ttl", 0, seen.callback()));
  ok(c[0]->put("/b/ttl", "5"));
  REQUIRE(seen.wait_events(1));
  CHECK(seen.snapshot()[0].kv.value == "5");
}

TEST_CASE("authentication: a client certificate's CN is the user when none is given") {
  auto& m = secured_member();
  auto c = connect(secured_options(m, "alice"));
  ok(c->put("/a/cn", "alice's"));
  recorder seen;
  auto w = ok(c->watch("/a/", 0, seen.callback()));
  ok(c->put("/a/cn", "again"));
  REQUIRE(seen.wait_events(1));
  auto put = c->put("/b/cn", "x");
  REQUIRE_FALSE(put);
  INFO(put.error().message);
  CHECK(put.error().code == errc::invalid_argument);
  CHECK(put.error().message.find("permission denied") != std::string::npos);
}
