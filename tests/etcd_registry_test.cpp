// The cluster's registry in etcd (cluster/etcd_registry.hpp) against a real etcd
// (tests/support/etcd_member.hpp): two stores share one registry; each sees the other's changes
// and never its own; writes are compare-and-set, a lost comparison succeeding only where etcd
// already holds the same record; a follower whose history was compacted gets the registry whole;
// malformed records are skipped; batches past etcd's transaction limit are written; etcd going
// away fails writes with unavailable and the follower resumes when it returns. Skipped (77)
// without an etcd executable.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cluster/etcd_registry.hpp"
#include "etcd/client.hpp"
#include "support/etcd_member.hpp"

namespace {

using namespace std::chrono_literals;
using namespace warm;
using warm::test::etcd_member;

[[maybe_unused]] const bool etcd_present = [] {
  if (etcd_member::executable().empty()) {
    std::fprintf(stderr, "etcd_registry_test: no etcd executable (/usr/bin/etcd or $ETCD)\n");
    std::_Exit(77);
  }
  return true;
}();

std::shared_ptr<etcd::client> connect(const etcd_member& m) {
  etcd::options o;
  o.endpoints = {m.endpoint()};
  o.timeout = 2000ms;
  auto c = etcd::client::connect(o);
  REQUIRE(c);
  return std::move(*c);
}

// What a follower delivered.
struct inbox {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<registry_update> updates;
  std::vector<std::string> log;

  std::function<void(registry_update)> sink() {
    return [this](registry_update u) {
      std::lock_guard<std::mutex> lock(mutex);
      updates.push_back(std::move(u));
      arrived.notify_all();
    };
  }
  std::function<void(const std::string&)> logger() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      log.push_back(line);
    };
  }
  // Waits until `n` updates have arrived (or 10 s).
  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return arrived.wait_for(lock, 10s, [&] { return updates.size() >= n; });
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return updates.size();
  }
  bool logged(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& l : log)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

std::unique_ptr<registry_storage> open_store(std::shared_ptr<etcd::client> c, inbox* in = nullptr) {
  cluster::etcd_registry_options o;
  o.etcd = std::move(c);
  o.cluster = "t";
  o.retry = 200ms;
  if (in) o.log = in->logger();
  auto s = cluster::open_etcd_registry(std::move(o));
  REQUIRE(s);
  return std::move(*s);
}

model_record model(const std::string& id, const std::string& path) {
  model_record r;
  r.id = id;
  r.path = path;
  return r;
}

}  // namespace

TEST_CASE("two stores share one registry and see each other's changes, never their own") {
  etcd_member m;
  REQUIRE(m.start());
  inbox a_in, b_in;
  auto a = open_store(connect(m), &a_in);
  auto b = open_store(connect(m), &b_in);
  auto a0 = a->load();
  auto b0 = b->load();
  REQUIRE(a0);
  REQUIRE(b0);
  CHECK(a0->models.empty());
  a->follow(a0->revision, a_in.sink());
  b->follow(b0->revision, b_in.sink());

  auto x = model("x", "x/1");
  x.version = 3;
  x.size_hint = 1 << 20;
  x.batching = batching_options{8, 500us, {2, 4}, 64};
  REQUIRE(a->apply({put_model{x}, put_vmodel{{"v", "x", "x"}}}));
  REQUIRE(b_in.wait_for(1));
  {
    std::lock_guard<std::mutex> lock(b_in.mutex);
    auto& u = b_in.updates[0];
    REQUIRE(u.changes.size() == 2);
    CHECK(u.revisions.size() == 2);
    CHECK(std::get<put_model>(u.changes[0]).record == x);  // every field travels
    CHECK(std::get<put_vmodel>(u.changes[1]).record == vmodel_record{"v", "x", "x"});
    CHECK(!u.reset);
    b->seen(u);
  }
  REQUIRE(b->apply(
      {put_vmodel{{"v", "x", "y"}}, erase_model{"gone"}}));  // erasing an absent id is fine
  REQUIRE(a_in.wait_for(1));
  std::this_thread::sleep_for(300ms);
  CHECK(a_in.count() == 1);  // b's change only: a's own write was not delivered to a
  CHECK(b_in.count() == 1);  // nor b's to b
  auto now = b->load();
  REQUIRE(now);
  REQUIRE(now->models.size() == 1);
  CHECK(now->models[0] == x);
  REQUIRE(now->vmodels.size() == 1);
  CHECK(now->vmodels[0].target == "y");
}

TEST_CASE("writes are compare-and-set: the same record twice succeeds, a different one fails") {
  etcd_member m;
  REQUIRE(m.start());
  auto a = open_store(connect(m));
  auto b = open_store(connect(m));
  REQUIRE(a->load());
  REQUIRE(b->load());
  REQUIRE(a->apply({put_model{model("x", "x/1")}}));
  // b never saw a's write: registering the same thing succeeds, something else does not.
  REQUIRE(b->apply({put_model{model("x", "x/1")}}));
  auto lost = a->load();  // resets a's revisions; then b writes again, unseen by a
  REQUIRE(lost);
  REQUIRE(b->apply({put_model{model("x", "x/2")}}));  // b knows x's revision now: an update
  auto conflict = a->apply({put_model{model("x", "x/3")}, put_model{model("y", "y/1")}});
  REQUIRE(!conflict);
  CHECK(conflict.error().code == errc::unavailable);
  CHECK(conflict.error().message.find("models/x") != std::string::npos);
  auto after = a->load();
  REQUIRE(after);
  REQUIRE(after->models.size() == 1);  // all or nothing: y was not written
  CHECK(after->models[0].path == "x/2");
  // Having loaded again, a's write goes through.
  REQUIRE(a->apply({put_model{model("x", "x/3")}}));
  // An erase compared likewise: b's view of x is stale.
  auto stale = b->apply({erase_model{"x"}});
  REQUIRE(!stale);
  CHECK(stale.error().code == errc::unavailable);
}

TEST_CASE("a batch larger than one etcd transaction is written whole") {
  etcd_member m;
  REQUIRE(m.start());
  auto a = open_store(connect(m));
  REQUIRE(a->load());
  std::vector<registry_change> batch;
  for (int i = 0; i < 300; ++i)
    batch.push_back(put_model{model("m" + std::to_string(1000 + i), "p")});
  batch.push_back(erase_model{"m1000"});  // a later change of the same key wins
  REQUIRE(a->apply(batch));
  auto all = a->load();
  REQUIRE(all);
  CHECK(all->models.size() == 299);
  CHECK(all->models.front().id == "m1001");
}

TEST_CASE("malformed records are skipped and logged") {
  etcd_member m;
  REQUIRE(m.start());
  auto c = connect(m);
  REQUIRE(c->put("/warm/t/registry/models/bad", "{not json"));
  REQUIRE(c->put("/warm/t/registry/models/ok", R"({"path":"ok/1","version":-1})"));
  REQUIRE(c->put("/warm/t/registry/other/z", "{}"));
  inbox in;
  auto a = open_store(c, &in);
  auto loaded = a->load();
  REQUIRE(loaded);
  CHECK(loaded->models.empty());
  CHECK(in.logged("models/bad: the value is not a JSON object"));
  CHECK(in.logged("models/ok: version is not a count"));
  CHECK(in.logged("other/z: neither a model nor a vmodel"));
  // A malformed record may be replaced by a registration (its revision is known).
  REQUIRE(a->apply({put_model{model("bad", "bad/1")}}));
  a->follow(loaded->revision, in.sink());
  REQUIRE(c->put("/warm/t/registry/vmodels/v", R"({"active":1})"));
  REQUIRE(c->put("/warm/t/registry/vmodels/w", R"({"active":"bad","target":"bad"})"));
  REQUIRE(in.wait_for(1));
  CHECK(in.logged("vmodels/v: active is not a string"));
  std::lock_guard<std::mutex> lock(in.mutex);
  REQUIRE(in.updates[0].changes.size() == 1);
  CHECK(std::get<put_vmodel>(in.updates[0].changes[0]).record.id == "w");
}

TEST_CASE("records are checked as registrations are: ids, paths and batching limits") {
  etcd_member m;
  REQUIRE(m.start());
  auto c = connect(m);
  // What someone who can write to etcd could put: a batch delay that would hold every request,
  // queues and batches past their limits, ids no client could register, an empty path.
  REQUIRE(c->put("/warm/t/registry/models/slow",
                 R"({"path":"slow/1","batching":{"max_batch":8,"max_queue_delay_us":60000001}})"));
  REQUIRE(c->put("/warm/t/registry/models/wide",
                 R"({"path":"wide/1","batching":{"max_batch":65537}})"));
  REQUIRE(c->put("/warm/t/registry/models/deep",
                 R"({"path":"deep/1","batching":{"max_batch":8,"max_queue":1048577}})"));
  REQUIRE(c->put("/warm/t/registry/models/has space", R"({"path":"x/1"})"));
  REQUIRE(c->put("/warm/t/registry/models/nopath", R"({"path":""})"));
  REQUIRE(c->put("/warm/t/registry/vmodels/v1", R"({"active":"ok","target":"a b"})"));
  REQUIRE(c->put("/warm/t/registry/vmodels/v2", R"({"active":"a/b","target":"ok"})"));
  // At the limits: taken.
  REQUIRE(c->put(
      "/warm/t/registry/models/edge",
      R"({"path":"edge/1","batching":{"max_batch":65536,"max_queue_delay_us":60000000,"max_queue":1048576}})"));
  REQUIRE(c->put("/warm/t/registry/vmodels/v3", R"({"active":"","target":"edge"})"));
  inbox in;
  auto a = open_store(c, &in);
  auto loaded = a->load();
  REQUIRE(loaded);
  REQUIRE(loaded->models.size() == 1);
  CHECK(loaded->models[0].id == "edge");
  CHECK(loaded->models[0].batching->max_queue_delay == std::chrono::microseconds(60000000));
  REQUIRE(loaded->vmodels.size() == 1);
  CHECK(loaded->vmodels[0].id == "v3");
  CHECK(in.logged("models/slow: batching: max_queue_delay is over 60000000 us"));
  CHECK(in.logged("models/wide: batching: max_batch is over 65536"));
  CHECK(in.logged("models/deep: batching: max_queue is over 1048576"));
  CHECK(in.logged("models/has space: model id 'has space' may hold only printable ASCII"));
  CHECK(in.logged("models/nopath: path is empty"));
  CHECK(in.logged("vmodels/v1: target model id 'a b' may hold only"));
  CHECK(in.logged("vmodels/v2: active model id 'a/b' may hold only"));
}

TEST_CASE("a follower whose history was compacted gets the registry whole") {
  etcd_member m;
  REQUIRE(m.start());
  auto c = connect(m);
  auto a = open_store(c);
  auto b = open_store(connect(m));
  auto start = b->load();
  REQUIRE(start);
  REQUIRE(a->load());
  REQUIRE(a->apply({put_model{model("x", "x/1")}}));
  REQUIRE(a->apply({put_model{model("y", "y/1")}, erase_model{"x"}}));
  auto head = c->get_prefix("/");
  REQUIRE(head);
  auto compact = "ETCDCTL_API=3 etcdctl --endpoints " + m.host_port() + " compact " +
                 std::to_string(head->revision) + " >/dev/null 2>&1";
  REQUIRE(std::system(compact.c_str()) == 0);
  inbox in;
  b->follow(start->revision, in.sink());
  REQUIRE(in.wait_for(1));
  registry_update reset;
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    reset = in.updates[0];
  }
  REQUIRE(reset.reset);
  CHECK(reset.changes.empty());
  CHECK(reset.revision >= head->revision);
  REQUIRE(reset.reset->models.size() == 1);
  CHECK(reset.reset->models[0].id == "y");
  // Once b has taken the listing in, its writes compare with its revisions.
  b->seen(reset);
  REQUIRE(b->apply({put_model{model("y", "y/2")}}));
  // And the follower goes on from there.
  REQUIRE(a->apply({put_model{model("z", "z/1")}}));
  REQUIRE(in.wait_for(2));
}

TEST_CASE("etcd going away fails writes with unavailable; the follower resumes when it returns") {
  etcd_member m;
  REQUIRE(m.start());
  auto a = open_store(connect(m));
  inbox in;
  auto b = open_store(connect(m), &in);
  auto start = b->load();
  REQUIRE(start);
  REQUIRE(a->load());
  b->follow(start->revision, in.sink());
  REQUIRE(a->apply({put_model{model("x", "x/1")}}));
  REQUIRE(in.wait_for(1));
  m.kill();
  auto down = a->apply({put_model{model("y", "y/1")}});
  REQUIRE(!down);
  CHECK(down.error().code == errc::unavailable);
  CHECK(down.error().message.find("the cluster's registry") != std::string::npos);
  REQUIRE(m.start());
  REQUIRE(a->apply({put_model{model("y", "y/1")}}));
  REQUIRE(in.wait_for(2));
  CHECK(in.logged("the watch ended"));
  std::lock_guard<std::mutex> lock(in.mutex);
  CHECK(std::get<put_model>(in.updates[1].changes[0]).record.id == "y");
}
