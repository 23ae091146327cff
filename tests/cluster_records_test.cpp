// The cluster's records (cluster/records.hpp): names and keys, the instance record's JSON both
// ways with every refusal naming its key and field, the record an inspection makes, and the
// placement view of a record.
#include <catch2/catch.hpp>

#include "cluster/records.hpp"

using namespace warm;
using namespace warm::cluster;

namespace {

instance_record sample() {
  instance_record r;
  r.name = "node-1";
  r.address = "127.0.0.1:7000";
  r.version = "0.1.0";
  r.started_unix = 1700000000;
  r.updated_unix = 1700000100;
  r.draining = true;
  r.loading_threads = 2;
  r.loads_in_flight = 3;
  r.models_loaded = 4;
  r.devices.push_back({"host", "kdf", 1000, 600, 4, 12.5, {{100, 0.25}, {300, 2.0}}});
  r.devices.push_back({"cuda:0", "lru", 2000, 100, 1, 3, {}});
  r.residents = {"a", "b"};
  r.loading = {"c", "d"};
  r.hot = {"a"};
  r.requests_per_second = 12.5;
  return r;
}

}  // namespace

TEST_CASE("cluster and instance names") {
  CHECK(*cluster_root("warm") == "/warm/warm/");
  CHECK(*cluster_root("prod-eu_1.a") == "/warm/prod-eu_1.a/");
  CHECK_FALSE(cluster_root(""));
  CHECK_FALSE(cluster_root("a/b"));
  CHECK_FALSE(cluster_root(std::string(65, 'a')));
  CHECK(cluster_root(std::string(64, 'a')));
  CHECK(check_instance_name("host-1:7000"));
  CHECK_FALSE(check_instance_name(""));
  CHECK_FALSE(check_instance_name("a b"));
  CHECK_FALSE(check_instance_name("a/b"));
  CHECK_FALSE(check_instance_name(std::string(129, 'x')));
  CHECK(instance_key("/warm/c/", "n1") == "/warm/c/instances/n1");
}

TEST_CASE("an instance record reads back as written") {
  auto r = sample();
  auto back = decode_instance("k", encode(r));
  REQUIRE(back);
  CHECK(back->name == r.name);
  CHECK(back->address == r.address);
  CHECK(back->version == r.version);
  CHECK(back->started_unix == r.started_unix);
  CHECK(back->updated_unix == r.updated_unix);
  CHECK(back->draining);
  CHECK(back->loading_threads == 2);
  CHECK(back->loads_in_flight == 3);
  CHECK(back->models_loaded == 4);
  REQUIRE(back->devices.size() == 2);
  CHECK(back->devices[0].name == "host");
  CHECK(back->devices[0].policy == "kdf");
  CHECK(back->devices[0].capacity == 1000);
  CHECK(back->devices[0].used == 600);
  CHECK(back->devices[0].models == 4);
  CHECK(back->devices[0].idle_seconds == 12.5);
  REQUIRE(back->devices[0].candidates.size() == 2);
  CHECK(back->devices[0].candidates[1].bytes == 300);
  CHECK(back->devices[0].candidates[1].value == 2.0);
  CHECK(back->devices[1].candidates.empty());
  CHECK(back->residents == std::vector<std::string>{"a", "b"});
  CHECK(back->same_state(r));
  auto moved = r;
  moved.residents = {"a", "c"};
  CHECK_FALSE(moved.same_state(r));  // a model loaded or evicted is news for forwarding
  CHECK(back->loading == std::vector<std::string>{"c", "d"});
  moved = r;
  moved.loading = {"c"};
  CHECK_FALSE(moved.same_state(r));  // a load finished is news for `status` copies
  CHECK(back->hot == std::vector<std::string>{"a"});
  CHECK(back->requests_per_second == 12.5);
  moved = r;
  moved.requests_per_second = 13;
  CHECK(moved.same_state(r));  // a rate drifts: republished at the refresh interval, not at once
  moved = r;
  moved.hot = {};
  CHECK_FALSE(moved.same_state(r));  // what the others load when this instance dies
}

TEST_CASE("a malformed instance record is refused, naming its key and field") {
  auto refused = [](const std::string& text) {
    auto r = decode_instance("/warm/c/instances/x", text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK(r.error().message.find("/warm/c/instances/x") != std::string::npos);
    return r.error().message;
  };
  CHECK(refused("not json").find("not a JSON object") != std::string::npos);
  CHECK(refused("[1,2]").find("not a JSON object") != std::string::npos);
  auto j = encode(sample());
  auto with = [&](const std::string& from, const std::string& to) {
    auto at = j.find(from);
    REQUIRE(at != std::string::npos);
    return std::string(j).replace(at, from.size(), to);
  };
  CHECK(refused(with("\"name\":\"node-1\"", "\"name\":7")).find("name must be a string") !=
        std::string::npos);
  CHECK(refused(with("\"name\":\"node-1\"", "\"name\":\"a b\"")).find("name must be a valid") !=
        std::string::npos);
  CHECK(refused(with("\"draining\":true", "\"draining\":1")).find("draining") != std::string::npos);
  CHECK(refused(with("\"loads_in_flight\":3", "\"loads_in_flight\":-3")).find("loads_in_flight") !=
        std::string::npos);
  CHECK(refused(with("\"loading_threads\":2", "\"loading_threads\":4294967296"))
            .find("loading_threads") != std::string::npos);
  CHECK(refused(with("\"capacity\":1000", "\"capacity\":\"big\"")).find("devices[0]: capacity") !=
        std::string::npos);
  CHECK(refused(with("[100,0.25]", "[100]")).find("candidates[0]") != std::string::npos);
  CHECK(refused(with("[100,0.25]", "[100,-1]")).find("candidates[0]") != std::string::npos);
  CHECK(refused(with("\"idle_seconds\":12.5", "\"idle_seconds\":-1")).find("idle_seconds") !=
        std::string::npos);
  CHECK(refused(with(",\"models_loaded\":4", "")).find("models_loaded") != std::string::npos);
  CHECK(refused(with("[\"a\",\"b\"]", "[\"a\",2]")).find("residents") != std::string::npos);
  CHECK(decode_instance("k", with(",\"residents\":[\"a\",\"b\"]", "")));  // absent: none
  CHECK(refused(with("[\"c\",\"d\"]", "{}")).find("loading must be an array") != std::string::npos);
  auto without_loading = decode_instance("k", with(",\"loading\":[\"c\",\"d\"]", ""));
  REQUIRE(without_loading);
  CHECK(without_loading->loading.empty());
  CHECK(refused(with("\"requests_per_second\":12.5", "\"requests_per_second\":-1"))
            .find("requests_per_second") != std::string::npos);
  auto without_rate = decode_instance("k", with(",\"requests_per_second\":12.5", ""));
  REQUIRE(without_rate);  // an older instance's record
  CHECK(without_rate->requests_per_second == 0);
  // Unknown fields are a newer instance's: ignored.
  CHECK(decode_instance("k", with("\"draining\":true", "\"draining\":true,\"zone\":\"eu\"")));
}

TEST_CASE("the record of an inspection: kdf devices publish their candidates, loads add up") {
  inspection s;
  s.max_concurrent_loads = 2;
  s.queue.resize(2);
  s.queue[0].model = "q";
  s.queue[1].model = "m1";  // a load queued again while it runs
  s.running.resize(1);
  s.running[0].model = "m1";
  device_info kdf;
  kdf.name = "host";
  kdf.policy = "kdf";
  kdf.capacity = 1000;
  kdf.used = 700;
  for (int i = 0; i < 5; ++i) {
    resident_info m;
    m.model = "m" + std::to_string(i);
    m.bytes = 100 + static_cast<std::uint64_t>(i);
    m.score = 0.5 * i;
    m.idle_seconds = i == 3 ? 40 : 1;
    kdf.resident.push_back(m);
  }
  device_info lru = kdf;
  lru.name = "cuda:0";
  lru.policy = "lru";
  s.devices = {kdf, lru};
  s.models.resize(2);
  s.models[0].requests_per_second = 1.5;
  s.models[1].requests_per_second = 2.5;
  auto r = record_from(s, "n", "unix:/tmp/s", "0.1.0", 5, false, 3);
  CHECK(r.requests_per_second == 4);  // every model's rate
  CHECK(r.loading_threads == 2);
  CHECK(r.loads_in_flight == 3);
  CHECK(r.models_loaded == 10);
  REQUIRE(r.devices.size() == 2);
  CHECK(r.devices[0].idle_seconds == 40);
  REQUIRE(r.devices[0].candidates.size() == 3);  // the first three in eviction order
  CHECK(r.devices[0].candidates[2].bytes == 102);
  CHECK(r.devices[0].candidates[2].value == 1.0);
  CHECK(r.devices[1].candidates.empty());  // lru's scores are ages
  CHECK(r.residents ==
        std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});  // sorted, each once
  CHECK(r.loading == std::vector<std::string>{"m1", "q"});        // queued and running
  // Hot: used within the minute (m3 was 40 s ago); sorted, each once.
  CHECK(r.hot == std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});
}

TEST_CASE("recent models: used within the limit or in use, most valuable first, each once") {
  inspection s;
  device_info kdf;
  kdf.policy = "kdf";
  device_info lru;
  lru.policy = "lru";
  auto add = [](device_info& d, const std::string& model, double score, double idle,
                std::uint32_t in_flight = 0) {
    resident_info m;
    m.model = model;
    m.bytes = 10;
    m.score = score;
    m.idle_seconds = idle;
    m.in_flight = in_flight;
    d.resident.push_back(m);
  };
  add(kdf, "low", 1, 5);
  add(kdf, "high", 9, 50);
  add(kdf, "old", 20, 61);
  add(kdf, "busy", 0.5, 600, 1);  // in use: recent however long ago it started
  add(lru, "recent", 100, 2);
  add(lru, "earlier", 100, 30);
  add(lru, "high", 100, 1);  // on both devices: listed once
  s.devices = {kdf, lru};
  auto names = [](const std::vector<recent_model>& v) {
    std::vector<std::string> out;
    for (const auto& m : v)
      out.push_back(m.model);
    return out;
  };
  CHECK(names(recent_models(s, 60)) ==
        std::vector<std::string>{"high", "low", "busy", "recent", "earlier"});
  CHECK(names(recent_models(s, 60, 2)) == std::vector<std::string>{"high", "low"});
  CHECK(names(recent_models(s, 61)).size() == 6);
  auto r = record_from(s, "n", "unix:/tmp/s", "0.1.0", 5, false);
  CHECK(r.hot == std::vector<std::string>{"busy", "earlier", "high", "low", "recent"});
}

TEST_CASE("a record's placement view is its roomiest device; same_state ignores what drifts") {
  auto r = sample();
  auto v = view_of(r);
  CHECK(v.capacity == 2000);  // cuda:0 has 1900 free, host 400
  CHECK(v.used == 100);
  CHECK(v.candidates.empty());
  CHECK(v.loads_in_flight == 3);
  CHECK(v.loading_threads == 2);
  CHECK(v.draining);
  auto later = r;
  later.updated_unix += 60;
  later.devices[0].idle_seconds += 60;
  later.devices[0].candidates[0].value = 0.1;
  CHECK(later.same_state(r));
  later.devices[0].used += 1;
  CHECK_FALSE(later.same_state(r));
  later = r;
  later.draining = false;
  CHECK_FALSE(later.same_state(r));
}
