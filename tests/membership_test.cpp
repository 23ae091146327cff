// An instance's membership (cluster/membership.hpp) against a real etcd
// (tests/support/etcd_member.hpp): instances see each other, changes and draining are
// republished, a stopped instance leaves at once, an instance whose lease expires leaves within
// its TTL, malformed records are ignored, and etcd going away and coming back is survived.
// Skipped (77) without an etcd executable.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cluster/membership.hpp"
#include "etcd/client.hpp"
#include "support/etcd_member.hpp"

namespace {

using namespace std::chrono_literals;
using namespace warm;
using warm::cluster::membership;
using warm::test::etcd_member;

[[maybe_unused]] const bool etcd_present = [] {
  if (etcd_member::executable().empty()) {
    std::fprintf(stderr, "membership_test: no etcd executable (/usr/bin/etcd or $ETCD)\n");
    std::_Exit(77);
  }
  return true;
}();

// A runtime stand-in: one kdf device whose used bytes the test sets.
struct fake_runtime {
  std::atomic<std::uint64_t> used{0};
  void inspect(callback<inspection> done) {
    inspection s;
    s.max_concurrent_loads = 2;
    device_info d;
    d.name = "host";
    d.policy = "kdf";
    d.capacity = 1000;
    d.used = used;
    s.devices.push_back(d);
    done(std::move(s));
  }
};

struct logbook {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  bool has(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

cluster::membership_options options_for(const etcd_member& etcd, const std::string& name,
                                        fake_runtime& rt, std::string cluster = "test") {
  cluster::membership_options o;
  o.endpoints = {etcd.endpoint()};
  o.cluster = std::move(cluster);
  o.instance = name;
  o.address = "unix:/tmp/" + name + ".sock";
  o.version = "test";
  o.lease_ttl = 2s;
  o.min_publish_interval = 100ms;
  o.refresh_interval = 1000ms;
  o.etcd_timeout = 1000ms;
  o.inspect = [&rt](callback<inspection> done) { rt.inspect(std::move(done)); };
  return o;
}

std::unique_ptr<membership> start(cluster::membership_options o) {
  auto m = membership::start(std::move(o));
  INFO((m ? std::string() : m.error().to_string()));
  REQUIRE(m);
  return std::move(*m);
}

// Polls `condition` every 20 ms until it holds or `limit` passes; whether it held.
template <typename F>
bool eventually(F condition, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

std::optional<cluster::member> find(const membership& m, const std::string& name) {
  for (auto& x : m.members())
    if (x.record.name == name) return x;
  return std::nullopt;
}

}  // namespace

TEST_CASE(
    "instances see each other, their changes and their draining; a stopped one leaves at once") {
  etcd_member etcd;
  REQUIRE(etcd.start());
  fake_runtime rt_a, rt_b;
  auto a = start(options_for(etcd, "a", rt_a));
  auto b = start(options_for(etcd, "b", rt_b));
  REQUIRE(eventually([&] { return find(*a, "b") && find(*b, "a") && find(*a, "a"); }, 5s));
  CHECK(a->status().joined);
  CHECK(a->status().lease != 0);
  CHECK(find(*a, "a")->self);
  CHECK_FALSE(find(*a, "b")->self);
  CHECK(find(*a, "b")->record.address == "unix:/tmp/b.sock");
  CHECK(find(*a, "b")->record.devices.at(0).capacity == 1000);

  rt_b.used = 640;  // a change is republished within the publish interval
  CHECK(eventually([&] { return find(*a, "b")->record.devices.at(0).used == 640; }, 2s));
  b->set_draining(true);
  CHECK(eventually([&] { return find(*a, "b")->record.draining; }, 1s));

  auto before = std::chrono::steady_clock::now();
  b.reset();  // revokes its lease
  CHECK(std::chrono::steady_clock::now() - before < 2s);
  CHECK(eventually([&] { return !find(*a, "b"); }, 1s));
}

TEST_CASE(
    "an instance whose lease expires leaves the others' view within its TTL; bad records are "
    "ignored") {
  etcd_member etcd;
  REQUIRE(etcd.start());
  fake_runtime rt;
  logbook log;
  auto o = options_for(etcd, "watcher", rt);
  o.log = log.sink();
  auto m = start(o);
  REQUIRE(eventually([&] { return find(*m, "watcher").has_value(); }, 5s));

  // A "crashed" instance: its record on a lease nobody renews.
  etcd::options eo;
  eo.endpoints = {etcd.endpoint()};
  auto c = etcd::client::connect(eo);
  REQUIRE(c);
  auto lease = (*c)->grant_lease(2);
  REQUIRE(lease);
  cluster::instance_record ghost;
  ghost.name = "ghost";
  ghost.address = "127.0.0.1:1";
  REQUIRE((*c)->put("/warm/test/instances/ghost", cluster::encode(ghost), lease->id));
  REQUIRE((*c)->put("/warm/test/instances/junk", "{not json"));
  // Forged records, as someone who can write to etcd would put them: on no lease (it would never
  // go), and under one name while naming another.
  cluster::instance_record forged = ghost;
  forged.name = "forged";
  REQUIRE((*c)->put("/warm/test/instances/forged", cluster::encode(forged)));
  REQUIRE((*c)->put("/warm/test/instances/other", cluster::encode(forged), lease->id));
  REQUIRE(eventually([&] { return find(*m, "ghost").has_value(); }, 2s));
  CHECK(eventually(
      [&] {
        return log.has(
            "instance record at /warm/test/instances/other names another instance ('forged')");
      },
      2s));
  CHECK(log.has("instance record at /warm/test/instances/forged is on no lease"));
  CHECK_FALSE(find(*m, "forged"));
  CHECK_FALSE(find(*m, "other"));
  auto put_at = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return !find(*m, "ghost"); }, 5s));
  CHECK(std::chrono::steady_clock::now() - put_at < 4s);  // the TTL, and etcd's expiry sweep
  CHECK(log.has("junk"));
  CHECK(m->members().size() == 1);
}

TEST_CASE(
    "etcd going away and coming back: the instance keeps its view, reports the error, and "
    "rejoins") {
  etcd_member etcd;
  REQUIRE(etcd.start());
  fake_runtime rt_a, rt_b;
  logbook log;
  auto with_log = options_for(etcd, "a", rt_a);
  with_log.log = log.sink();
  auto a = start(with_log);
  auto b = start(options_for(etcd, "b", rt_b));
  REQUIRE(eventually([&] { return find(*a, "b") && find(*b, "a"); }, 5s));

  etcd.kill();
  CHECK(eventually([&] { return !a->status().last_error.empty(); }, 4s));
  CHECK(find(*a, "b"));  // the last view stays while etcd cannot say otherwise

  std::this_thread::sleep_for(3s);  // longer than the TTL: the leases may be gone
  REQUIRE(etcd.start());
  CHECK(eventually(
      [&] {
        auto s = a->status();
        return s.joined && s.last_error.empty() && find(*a, "b") && find(*b, "a") && find(*b, "b");
      },
      15s));
  // Retries while etcd was down were logged once, not every second.
  std::size_t failures_logged = 0;
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    for (auto& l : log.lines)
      failures_logged += l.find("cluster: cannot") != std::string::npos;
  }
  CHECK(failures_logged >= 1);
  CHECK(failures_logged <= 2);
  rt_a.used = 77;  // and publishing works again
  CHECK(eventually([&] { return find(*b, "a")->record.devices.at(0).used == 77; }, 3s));
}

TEST_CASE("an instance whose lease expired while etcd was frozen joins again under a new lease") {
  etcd_member etcd;
  REQUIRE(etcd.start());
  fake_runtime rt_a, rt_b;
  auto a = start(options_for(etcd, "a", rt_a));
  auto b = start(options_for(etcd, "b", rt_b));
  REQUIRE(eventually([&] { return find(*a, "b") && find(*b, "a"); }, 5s));
  auto old_lease = a->status().lease;
  etcd.pause();  // answers nothing, keeps its clock: the 2 s leases run out
  std::this_thread::sleep_for(4s);
  etcd.resume();
  CHECK(eventually(
      [&] {
        auto s = a->status();
        return s.joined && s.lease != old_lease && find(*a, "b") && find(*b, "a");
      },
      15s));
}

TEST_CASE("a membership refuses bad options") {
  fake_runtime rt;
  etcd_member etcd;  // not started: start() does no I/O
  auto refused = [](cluster::membership_options o, const std::string& what) {
    auto m = membership::start(std::move(o));
    REQUIRE_FALSE(m);
    CHECK(m.error().code == errc::invalid_argument);
    CHECK(m.error().message.find(what) != std::string::npos);
  };
  auto o = options_for(etcd, "a", rt);
  o.cluster = "bad/name";
  refused(o, "cluster name");
  o = options_for(etcd, "a", rt);
  o.instance = "";
  refused(o, "instance name");
  o = options_for(etcd, "a", rt);
  o.address = "";
  refused(o, "address");
  o = options_for(etcd, "a", rt);
  o.lease_ttl = 1s;
  refused(o, "at least 2 seconds");
  o = options_for(etcd, "a", rt);
  o.refresh_interval = 10ms;
  refused(o, "refresh interval");
  o = options_for(etcd, "a", rt);
  o.inspect = nullptr;
  refused(o, "inspection");
  o = options_for(etcd, "a", rt);
  o.endpoints = {};
  CHECK_FALSE(membership::start(o));
}
