// The disk tier actor (actors/tier_actor.hpp) over an in-memory store and a real tier directory:
// one fetch however many ask for a file at once, hits without fetching, pins that keep a file from
// eviction until dropped, a failed fetch answered to every waiter, and an object that changes size
// while it is fetched.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "actors/protocol/tier_protocol.hpp"
#include "actors/tier_actor.hpp"
#include "runtime/executor.hpp"
#include "storage/file.hpp"
#include "storage/file_arrival.hpp"
#include "support/fake_store.hpp"

using namespace std::chrono_literals;
using namespace warm;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct tier_fixture {
  std::string dir;
  manual_clock time;
  std::shared_ptr<test::fake_store> store = std::make_shared<test::fake_store>();
  std::shared_ptr<runtime_metrics> metrics = std::make_shared<runtime_metrics>(0);
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  std::unique_ptr<executor> fetcher = std::make_unique<executor>(4);
  std::shared_ptr<const sources::remote_repository> remote;
  tier_actor tier;

  explicit tier_fixture(std::uint64_t capacity) {
    char templ[] = "/tmp/warm-tier-actor-XXXXXX";
    dir = mkdtemp(templ);
    system = std::make_unique<caf::actor_system>(config);
    sources::remote_stores stores;
    stores.s3 = store;
    remote = std::make_shared<const sources::remote_repository>(
        *sources::remote_repository::create({}, stores));
    auto opened = sources::disk_tier::open(dir + "/tier", capacity, "lru", time);
    REQUIRE(opened);
    tier_config c;
    c.tier = std::make_unique<sources::disk_tier>(std::move(*opened));
    c.remote = remote;
    c.fetch_on = [f = fetcher.get()](std::function<void()> task) { f->submit(std::move(task)); };
    c.metrics = metrics;
    tier = spawn_tier(*system, std::move(c));
  }
  ~tier_fixture() {
    caf::anon_send_exit(tier, caf::exit_reason::user_shutdown);
    tier = nullptr;
    system->await_all_actors_done();
    fetcher.reset();
    system.reset();
    fs::remove_all(dir);
  }

  sources::remote_model model(const std::string& url) {
    auto m = remote->resolve(url);
    REQUIRE(m);
    return *m;
  }
  std::future<expected<tier_copy>> acquire(const sources::remote_model& m,
                                           copy_mode mode = copy_mode::committed) {
    auto p = std::make_shared<std::promise<expected<tier_copy>>>();
    auto f = p->get_future();
    caf::anon_send(tier,
                   msg::acquire_copy{m, [p](expected<tier_copy> r) { p->set_value(r); }, mode});
    return f;
  }
  expected<tier_copy> acquire_now(const sources::remote_model& m,
                                  copy_mode mode = copy_mode::committed) {
    auto f = acquire(m, mode);
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    return f.get();
  }
};

}  // namespace

TEST_CASE("tier: requests for one file while it is fetched share one fetch; later ones hit") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, std::string(1000, 'w'));
  auto m = f.model(url);
  f.store->close_gate();
  std::vector<std::future<expected<tier_copy>>> waiting;
  for (int i = 0; i < 5; ++i)
    waiting.push_back(f.acquire(m));
  std::this_thread::sleep_for(
      50ms);  // every request is in the actor's mailbox before the fetch ends
  f.store->open_gate();
  std::string path;
  for (auto& w : waiting) {
    REQUIRE(w.wait_for(10s) == std::future_status::ready);
    auto copy = w.get();
    REQUIRE(copy);
    CHECK(copy->where.source == url);
    CHECK(copy->where.source_etag == "etag-1");
    CHECK(copy->where.source_bytes == 1000u);
    CHECK(copy->where.kind == "dense");
    CHECK(copy->where.version == 1u);
    CHECK(read_all(copy->where.path) == std::string(1000, 'w'));
    if (path.empty()) path = copy->where.path;
    CHECK(copy->where.path == path);
    CHECK(copy->where.path.rfind(copy->where.root + "/", 0) == 0);  // confined to the tier
  }
  CHECK(f.store->fetches() == 1);
  CHECK(f.metrics->tier_misses.value() == 1);

  auto again = f.acquire_now(m);
  REQUIRE(again);
  CHECK(again->where.path == path);
  CHECK(f.store->fetches() == 1);
  CHECK(f.metrics->tier_hits.value() == 1);
  CHECK(f.metrics->fetches.value() == 1);
  CHECK(f.metrics->fetch_bytes.value() == 1000u);
  CHECK(f.metrics->tier_files.value() == 1);
}

TEST_CASE("tier: a pinned file is not evicted; once its pin is dropped it is") {
  tier_fixture f(1500);
  const std::string a = "s3://models/a/1/model.safetensors",
                    b = "s3://models/b/1/model.safetensors";
  f.store->put(a, std::string(1000, 'a'));
  f.store->put(b, std::string(1000, 'b'));
  auto held = f.acquire_now(f.model(a));
  REQUIRE(held);
  auto refused = f.acquire_now(f.model(b));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::capacity_exhausted);
  CHECK_THAT(refused.error().message, Catch::Contains(b));
  CHECK(fs::exists(held->where.path));

  held->pin.reset();  // released through the actor's mailbox, ahead of the next request
  auto taken = f.acquire_now(f.model(b));
  REQUIRE(taken);
  CHECK(read_all(taken->where.path) == std::string(1000, 'b'));
  CHECK_FALSE(fs::exists(held->where.path));
  CHECK(f.metrics->tier_evictions.value() == 1);
}

TEST_CASE(
    "tier: a failed fetch answers every waiter, keeps nothing, and the next request fetches") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, std::string(100, 'x'));
  auto m = f.model(url);
  f.store->fail_fetches(1, make_error(errc::unavailable, "s3 said 503 SlowDown"));
  f.store->close_gate();
  auto first = f.acquire(m);
  auto second = f.acquire(m);
  std::this_thread::sleep_for(50ms);
  f.store->open_gate();
  for (auto* w : {&first, &second}) {
    auto r = w->get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::unavailable);
    CHECK_THAT(r.error().message, Catch::Contains("503"));
  }
  CHECK(f.metrics->fetch_failures.value() == 1);
  CHECK(fs::is_empty(f.dir + "/tier/incoming"));
  auto ok = f.acquire_now(m);
  REQUIRE(ok);
  CHECK(read_all(ok->where.path) == std::string(100, 'x'));
  CHECK(f.store->fetches() == 2);
}

TEST_CASE("tier: an object that changes size during its fetch is reserved and fetched again") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, std::string(100, 'o'));
  auto m = f.model(url);
  f.store->during_next_fetch([&] { f.store->put(url, std::string(300, 'n')); });
  auto r = f.acquire_now(m);
  REQUIRE(r);
  CHECK(read_all(r->where.path) == std::string(300, 'n'));
  CHECK(r->where.source_bytes == 300u);
  CHECK(r->where.source_etag == "etag-2");
}

TEST_CASE("tier: an arriving copy is answered before its fetch ends, and its reads follow it") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  const std::string bytes = std::string(500, 'a') + std::string(500, 'b');
  f.store->put(url, bytes);
  auto m = f.model(url);
  f.store->close_gate();
  auto early = f.acquire_now(m, copy_mode::arriving);  // answered with the gate still closed
  REQUIRE(early);
  REQUIRE(early->where.arriving);
  CHECK(early->where.source == url);
  CHECK(early->where.source_bytes == 1000u);
  // A second reader while the fetch is held: answered at once too, following the same fetch.
  auto second = f.acquire(m, copy_mode::arriving);
  REQUIRE(second.wait_for(5s) == std::future_status::ready);
  auto follower = second.get();
  REQUIRE(follower);
  CHECK(follower->where.arriving == early->where.arriving);
  auto committed = f.acquire(m);  // waits for the whole file
  auto file = read_file::arriving(early->where.arriving);
  REQUIRE(file);
  const auto epoch = file->arrival_epoch();
  CHECK(early->where.arriving->contiguous() == 0u);
  std::uint64_t seen_mid_fetch = 0;
  bool committed_early = true;
  f.store->during_next_fetch([&] {
    seen_mid_fetch = early->where.arriving->contiguous();
    committed_early = committed.wait_for(0s) == std::future_status::ready;
  });
  f.store->open_gate();
  std::string read(1000, '\0');
  REQUIRE(file->read_exactly(read.data(), read.size(), 0));
  CHECK(read == bytes);
  CHECK(seen_mid_fetch == 500u);  // the first half was readable while the second was on its way
  CHECK_FALSE(committed_early);
  CHECK(early->where.arriving->settled(epoch));
  REQUIRE(committed.wait_for(10s) == std::future_status::ready);
  auto whole = committed.get();
  REQUIRE(whole);
  CHECK_FALSE(whole->where.arriving);
  CHECK(read_all(whole->where.path) == bytes);
  CHECK(f.store->fetches() == 1);
}

TEST_CASE("tier: a copy followed while its object is replaced is never taken as the object") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, std::string(1000, 'o'));
  auto m = f.model(url);
  f.store->close_gate();
  auto early = f.acquire_now(m, copy_mode::arriving);
  REQUIRE(early);
  auto file = read_file::arriving(early->where.arriving);
  REQUIRE(file);
  const auto epoch = file->arrival_epoch();
  f.store->during_next_fetch([&] { f.store->put(url, std::string(1000, 'n')); });  // same size
  f.store->open_gate();
  std::string read(1000, '\0');
  auto r = file->read_exactly(read.data(), read.size(), 0);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("replaced"));
  CHECK_FALSE(early->where.arriving->settled(epoch));
  // The tier fetched it again from the start and holds the new object whole.
  auto now = f.acquire_now(f.model(url));
  REQUIRE(now);
  CHECK(read_all(now->where.path) == std::string(1000, 'n'));
}

TEST_CASE("tier: held_only answers from what the tier holds and never fetches") {
  tier_fixture f(1 << 20);
  const std::string url = "s3://models/m/1/model.safetensors";
  f.store->put(url, std::string(100, 'h'));
  auto m = f.model(url);
  auto none = f.acquire_now(m, copy_mode::held_only);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == errc::not_found);
  CHECK(f.store->fetches() == 0);
  CHECK(f.metrics->tier_misses.value() == 0);
  REQUIRE(f.acquire_now(m));
  auto held = f.acquire_now(m, copy_mode::held_only);
  REQUIRE(held);
  CHECK(read_all(held->where.path) == std::string(100, 'h'));
  CHECK(f.store->fetches() == 1);
}

TEST_CASE("tier: inspect_tier answers its files by source and its totals, or one source's file") {
  tier_fixture f(1 << 20);
  const std::string a = "s3://models/a/1/model.safetensors", b = "s3://models/b/1/model.pt";
  f.store->put(a, std::string(300, 'a'));
  f.store->put(b, std::string(200, 'b'));
  REQUIRE(f.acquire_now(f.model(a)));
  REQUIRE(f.acquire_now(f.model(b)));
  REQUIRE(f.acquire_now(f.model(a)));  // a hit
  auto inspect = [&](std::string source) {
    auto p = std::make_shared<std::promise<tier_info>>();
    auto answer = p->get_future();
    caf::anon_send(f.tier, msg::inspect_tier{[p](tier_info t) { p->set_value(std::move(t)); },
                                             std::move(source)});
    REQUIRE(answer.wait_for(10s) == std::future_status::ready);
    return answer.get();
  };
  auto all = inspect("");
  CHECK(all.open);
  CHECK(all.dir == f.dir + "/tier");
  CHECK(all.capacity == 1u << 20);
  CHECK(all.used == 500u);
  CHECK(all.reserved == 0u);
  CHECK(all.files == 2u);
  CHECK(all.hits == 1u);
  CHECK(all.misses == 2u);
  CHECK(all.fetches == 2u);
  CHECK(all.fetch_failures == 0u);
  CHECK(all.fetch_bytes == 500u);
  CHECK(all.fetch_seconds >= 0);
  REQUIRE(all.held.size() == 2);
  CHECK(all.held[0].source == b);  // lru: b, used longest ago, goes first
  CHECK(all.held[0].bytes == 200u);
  CHECK(all.held[1].source == a);
  CHECK(all.held[1].models.empty());  // the tier knows no model ids
  auto one = inspect(a);
  REQUIRE(one.held.size() == 1);
  CHECK(one.held[0].source == a);
  CHECK(one.held[0].bytes == 300u);
  CHECK(one.files == 2u);  // the totals stay the tier's
  CHECK(inspect("s3://models/none/model.safetensors").held.empty());
}
