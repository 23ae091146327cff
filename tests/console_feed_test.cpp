// The console's pure parts (src/console): latency quantiles and rates between two readings, the
// event log's numbering and bounds, what each state change is called, the feed's and the models
// page's JSON with their bounds, and the routes' query checks.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "console/event_log.hpp"
#include "console/feed.hpp"
#include "console/series.hpp"

using json = nlohmann::json;
using namespace warm;
using namespace warm::console;

namespace {

histogram::reading buckets(std::vector<std::uint64_t> cumulative, std::uint64_t count) {
  histogram::reading r;
  r.upper_bounds = {1, 2, 4};
  r.cumulative = std::move(cumulative);
  r.count = count;
  return r;
}

reading at(double t, std::uint64_t hits, std::uint64_t misses) {
  reading r;
  r.unix_seconds = 1000 + t;
  r.monotonic_seconds = t;
  r.hits = hits;
  r.misses = misses;
  r.latency = buckets({0, 0, 0}, 0);
  return r;
}

}  // namespace

TEST_CASE("quantiles are read from the observations between two readings, within their bucket") {
  auto empty = buckets({0, 0, 0}, 0);
  auto twenty = buckets({10, 20, 20}, 20);
  CHECK(quantile_between(empty, twenty, 0.5) == Approx(1.0));
  CHECK(quantile_between(empty, twenty, 0.99) == Approx(1.98));
  // Only what came after `before` counts: 5 of the first bucket were there already.
  CHECK(quantile_between(buckets({5, 5, 5}, 5), twenty, 0.5) == Approx(1.25));
  // Past the last bound: the last bound.
  CHECK(quantile_between(empty, buckets({10, 20, 20}, 25), 0.99) == Approx(4.0));
  // Nothing observed: 0; an empty first bucket is skipped, not interpolated into.
  CHECK(quantile_between(twenty, twenty, 0.5) == 0);
  CHECK(quantile_between(empty, buckets({0, 4, 4}, 4), 0.0) == Approx(1.0));
}

TEST_CASE("series points are per second over the time between readings, and bounded") {
  series s(3);
  s.add(at(0, 0, 0));
  CHECK(s.size() == 0);  // a point needs two readings
  auto r = at(2, 30, 10);
  r.loads = 4;
  r.evictions = 2;
  r.load_bytes = 2048;
  r.errors = 2;
  r.latency = buckets({10, 20, 20}, 20);
  s.add(r);
  auto p = s.after(0);
  REQUIRE(p.size() == 1);
  CHECK(p[0].t == 1002);
  CHECK(p[0].requests_per_second == Approx(21));  // 42 requests in 2 s
  CHECK(p[0].hit_ratio == Approx(0.75));
  CHECK(p[0].loads_per_second == Approx(2));
  CHECK(p[0].evictions_per_second == Approx(1));
  CHECK(p[0].load_bytes_per_second == Approx(1024));
  CHECK(p[0].p50_ms == Approx(1000));
  s.add(at(2, 99, 99));  // time did not move: ignored
  CHECK(s.size() == 1);
  auto later = at(3, 30, 10);  // nothing new: zero rates, no latency
  later.latency = r.latency;
  s.add(later);
  CHECK(s.after(1002).size() == 1);
  CHECK(s.after(1002)[0].requests_per_second == 0);
  CHECK(s.after(1002)[0].p99_ms == 0);
  for (int t = 4; t < 10; ++t)
    s.add(at(t, 30, 10));
  CHECK(s.size() == 3);  // the newest three
  CHECK(s.after(0).front().t == 1007);
}

TEST_CASE("the event log numbers events and hands out the newest after a number, bounded") {
  event_log log(4);
  CHECK(log.last() == 0);
  for (int i = 0; i < 6; ++i) {
    event e;
    e.model = "m" + std::to_string(i);
    e.seq = 99;  // overwritten
    log.add(e);
  }
  CHECK(log.last() == 6);
  auto all = log.after(0, 10);
  REQUIRE(all.size() == 4);  // the first two were dropped
  CHECK(all.front().seq == 6);
  CHECK(all.front().model == "m5");
  CHECK(all.back().seq == 3);
  auto newer = log.after(4, 10);
  REQUIRE(newer.size() == 2);
  CHECK(newer[1].seq == 5);
  CHECK(log.after(0, 1).size() == 1);
  CHECK(log.after(6, 10).empty());
}

TEST_CASE("a state change is named for an operator") {
  model_event e;
  e.previous = model_state::loaded;
  e.state = model_state::not_loaded;
  e.reason = "capacity";
  CHECK(model_event_kind(e) == "evicted");
  CHECK(from_model_event(e, 1).reason == "capacity");
  e.reason = "unload";
  CHECK(model_event_kind(e) == "unloaded");
  e.reason = "";  // a served model's old version retired
  CHECK(model_event_kind(e) == "unloaded");
  CHECK(from_model_event(e, 1).reason.empty());
  e.previous = model_state::queued;
  CHECK(model_event_kind(e) == "cancelled");
  e.previous = model_state::loading_failed;
  CHECK(model_event_kind(e) == "retry");
  e.previous = model_state::loading;
  e.state = model_state::loading_failed;
  e.error = warm::error{errc::load_failed, "bad header"};
  auto failed = from_model_event(e, 12.5);
  CHECK(failed.kind == "failed");
  CHECK(failed.error == "bad header");
  CHECK(failed.from == "LOADING");
  CHECK(failed.to == "LOADING_FAILED");
  e.state = model_state::not_found;
  CHECK(model_event_kind(e) == "unregistered");
}

TEST_CASE("the feed bounds its lists and computes what is reserved") {
  snapshot s;
  device_info d;
  d.name = "host";
  d.capacity = 1 << 20;
  d.draining = 100;
  for (std::size_t i = 0; i < max_residents + 5; ++i)
    d.resident.push_back({"m" + std::to_string(i), 10, 0, 0, 1.5, 0.25, 0, 0});
  d.used = 10 * d.resident.size() + 100 + 4096;  // residents, draining, a reservation
  s.state.devices.push_back(d);
  for (std::size_t i = 0; i < max_list + 1; ++i)
    s.state.queue.push_back({"q" + std::to_string(i), true, 1.0, 0, 2});
  s.state.running.push_back({"r", "host", "loading", 1, 3, 85.0, 4096});
  s.state.registered_models = 10000;
  s.counters.hits = 3;
  s.counters.misses = 1;
  std::vector<event> events(max_events + 7);
  auto j = json::parse(encode_feed(s, {}, events, 42));
  const auto& dev = j["devices"][0];
  CHECK(dev["residents"].size() == max_residents);
  CHECK(dev["residents_total"] == max_residents + 5);
  CHECK(dev["reserved"] == 4096);
  CHECK(dev["residents"][0]["model"] == "m0");  // eviction order kept
  CHECK(j["queue"].size() == max_list);
  CHECK(j["queue_total"] == max_list + 1);
  CHECK(j["running"][0]["waiters"] == 3);
  CHECK(j["running"][0]["elapsed_ms"] == 85.0);
  CHECK(j["events"].size() == max_events);
  CHECK(j["events_last"] == 42);
  CHECK(j["totals"]["requests"] == 4);
  CHECK(j["totals"]["loaded"] == max_residents + 5);
  CHECK(j["totals"]["registered"] == 10000);
  CHECK(j["cluster"].is_null());
  // A used figure below what is accounted never goes negative.
  s.state.devices[0].used = 5;
  CHECK(json::parse(encode_feed(s, {}, {}, 0))["devices"][0]["reserved"] == 0);
}

TEST_CASE("the feed carries hostile strings as text and the cluster when there is one") {
  snapshot s;
  failure_info f;
  f.model = "<img src=x onerror=alert(1)>";
  f.error = warm::error{errc::load_failed, std::string("bad \xff\xfe bytes")};
  s.state.failures.push_back(f);
  cluster_info c;
  c.enabled = true;
  c.name = "prod";
  cluster_instance i;
  i.name = "a";
  i.self = true;
  for (int k = 0; k < 2100; ++k)
    i.residents.push_back("m" + std::to_string(k));
  c.instances.push_back(i);
  s.cluster = c;
  auto j = json::parse(encode_feed(s, {}, {}, 0));  // invalid UTF-8 replaced, not thrown
  CHECK(j["failures"][0]["model"] == "<img src=x onerror=alert(1)>");
  CHECK(j["failures"][0]["code"] == "load_failed");
  CHECK(j["cluster"]["name"] == "prod");
  CHECK(j["cluster"]["instances"][0]["residents"].size() == max_residents);
  s.cluster->enabled = false;  // running alone
  CHECK(json::parse(encode_feed(s, {}, {}, 0))["cluster"].is_null());
}

TEST_CASE("a models page is rows in column order, with the id to ask after") {
  model_status m;
  m.id = "a";
  m.state = model_state::loaded;
  m.device = "host";
  m.version = 3;
  m.bytes = 8;
  m.requests = 5;
  m.hits = 4;
  m.loads.count = 2;
  m.loads.mean_ms = 35.5;
  m.batching = batching_options{};
  m.batching->max_batch = 16;
  m.batching->max_queue_delay = std::chrono::microseconds(500);
  model_status n;
  n.id = "b";
  n.state = model_state::loading_failed;
  n.last_error = warm::error{errc::load_failed, "no file"};
  auto j = json::parse(encode_models({m, n}, std::string("b")));
  auto col = [&](const char* name) {
    auto& c = j["columns"];
    return static_cast<std::size_t>(std::find(c.begin(), c.end(), name) - c.begin());
  };
  REQUIRE(j["rows"].size() == 2);
  const auto& a = j["rows"][0];
  CHECK(a[col("id")] == "a");
  CHECK(a[col("state")] == "LOADED");
  CHECK(a[col("version")] == 3);
  CHECK(a[col("loads")] == 2);
  CHECK(a[col("mean_load_ms")] == 35.5);
  CHECK(a[col("batching")] == "16/500");
  CHECK(j["rows"][1][col("error")] == "no file");
  CHECK(j["rows"][1][col("version")].is_null());
  CHECK(j["next"] == "b");
  CHECK(json::parse(encode_models({}, std::nullopt))["next"].is_null());
}

TEST_CASE("the routes' queries are checked: names, repeats and ranges") {
  CHECK(parse_feed_query({}).value().events_after == 0);
  auto q = parse_feed_query({{"events_after", "17"}, {"series_after", "1764336000"}});
  REQUIRE(q);
  CHECK(q->events_after == 17);
  CHECK(q->series_after == 1764336000.0);
  CHECK_FALSE(parse_feed_query({{"events_after", "-1"}}));
  CHECK_FALSE(parse_feed_query({{"events_after", "1x"}}));
  CHECK_FALSE(parse_feed_query({{"events_after", ""}}));
  CHECK_FALSE(parse_feed_query({{"series_after", "1.5"}}));
  CHECK_FALSE(parse_feed_query({{"series_after", "99999999999999"}}));
  CHECK_FALSE(parse_feed_query({{"events_after", "1"}, {"events_after", "2"}}));
  auto unknown = parse_feed_query({{"evil", "1"}});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message.find("evil") != std::string::npos);

  CHECK(parse_models_query({}).value().limit == max_models_page);
  auto m = parse_models_query({{"after", "m9"}, {"limit", "1"}});
  REQUIRE(m);
  CHECK(m->after == "m9");
  CHECK(m->limit == 1);
  CHECK_FALSE(parse_models_query({{"limit", "0"}}));
  CHECK_FALSE(parse_models_query({{"limit", std::to_string(max_models_page + 1)}}));
  CHECK_FALSE(parse_models_query({{"after", std::string(1025, 'a')}}));
  CHECK_FALSE(parse_models_query({{"offset", "3"}}));
}
