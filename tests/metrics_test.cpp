// Metrics: the Prometheus text writer against the format's rules, histograms, and the runtime's
// instruments moving as requests are served, loads run and models are evicted.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "metrics/text_format.hpp"
#include "support/runtime_fixture.hpp"
#include "warm/metrics.hpp"

using namespace warm;
using namespace warm::test;
namespace prom = warm::prometheus;

namespace {

// The samples of an exposition, "name{labels}" → value, checking each line's shape on the way:
// comments are HELP or TYPE, every sample line is "series value".
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    REQUIRE(!line.empty());
    if (line[0] == '#') {
      REQUIRE((line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0));
      continue;
    }
    auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    auto value = line.substr(space + 1);
    out[line.substr(0, space)] = value == "+Inf" ? INFINITY : std::stod(value);
  }
  return out;
}

}  // namespace

TEST_CASE("names, label values and help text follow the exposition format") {
  CHECK(prom::valid_metric_name("warm_requests_total"));
  CHECK(prom::valid_metric_name("ns:metric_1"));
  CHECK_FALSE(prom::valid_metric_name("1abc"));
  CHECK_FALSE(prom::valid_metric_name("a-b"));
  CHECK_FALSE(prom::valid_metric_name(""));
  CHECK(prom::valid_label_name("device"));
  CHECK_FALSE(prom::valid_label_name("__reserved"));
  CHECK_FALSE(prom::valid_label_name("a:b"));
  CHECK(prom::escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  CHECK(prom::escape_help("x\\y\nz\"") == "x\\\\y\\nz\"");
  CHECK(prom::format_value(INFINITY) == "+Inf");
  CHECK(prom::format_value(-INFINITY) == "-Inf");
  CHECK(prom::format_value(NAN) == "NaN");
  CHECK(prom::format_value(0.1) == "0.1");
  CHECK(prom::format_value(1e21) == "1e+21");
  CHECK(prom::format_value(3) == "3");
}

TEST_CASE("the writer emits HELP and TYPE once per family and refuses what the format forbids") {
  prom::text_writer w;
  w.family("warm_x_total", prom::kind::counter, "An \"x\".\nSecond line");
  w.sample({{"model", "we\"ird\nid"}}, 2);
  w.sample({}, 3);
  CHECK(w.text() ==
        "# HELP warm_x_total An \"x\".\\nSecond line\n# TYPE warm_x_total counter\n"
        "warm_x_total{model=\"we\\\"ird\\nid\"} 2\nwarm_x_total 3\n");
  CHECK_THROWS_AS(w.family("warm_x_total", prom::kind::gauge, "again"), std::invalid_argument);
  CHECK_THROWS_AS(w.family("bad-name", prom::kind::gauge, ""), std::invalid_argument);
  w.family("warm_g", prom::kind::gauge, "");
  CHECK_THROWS_AS(w.sample({{"__name__", "x"}}, 1), std::invalid_argument);
  CHECK_THROWS_AS(w.histogram({}, histogram({1}).read()), std::invalid_argument);
  w.family("warm_h_seconds", prom::kind::histogram, "");
  CHECK_THROWS_AS(w.sample({}, 1), std::invalid_argument);
  CHECK_THROWS_AS(w.histogram({{"le", "1"}}, histogram({1}).read()), std::invalid_argument);
}

TEST_CASE("histograms are cumulative, end with +Inf and count what they sum") {
  histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 2.0, 100.0, double(NAN)})
    h.observe(v);
  auto r = h.read();
  CHECK(r.cumulative == std::vector<std::uint64_t>{2, 3, 4});  // le is inclusive: 0.1 counts in 0.1
  CHECK(r.count == 5);
  CHECK(r.sum == Approx(102.65));
  prom::text_writer w;
  w.family("warm_h_seconds", prom::kind::histogram, "h");
  w.histogram({{"device", "host"}}, r);
  auto s = samples(w.text());
  CHECK(s.at("warm_h_seconds_bucket{device=\"host\",le=\"0.1\"}") == 2);
  CHECK(s.at("warm_h_seconds_bucket{device=\"host\",le=\"10\"}") == 4);
  CHECK(s.at("warm_h_seconds_bucket{device=\"host\",le=\"+Inf\"}") == 5);
  CHECK(s.at("warm_h_seconds_count{device=\"host\"}") == 5);
  CHECK(s.at("warm_h_seconds_sum{device=\"host\"}") == Approx(102.65));
  CHECK_THROWS_AS(histogram({1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(histogram({1, INFINITY}), std::invalid_argument);
}

TEST_CASE("the runtime's counters move with hits, misses, errors, loads and evictions") {
  // Room for two of the 544-byte models: a third load evicts one.
  runtime_fixture f({"a", "b", "c"}, {"host:1200B"});
  f.register_all();
  auto& rt = *f.rt;
  auto text = [&] { return samples(prometheus_text(rt.metrics(), rt.devices())); };
  CHECK(text().at("warm_models_registered") == 3);
  CHECK(text().at("warm_device_capacity_bytes{device=\"host\"}") == 1200);

  REQUIRE(rt.infer({"a", {input()}}).get());            // miss
  REQUIRE(rt.infer({"a", {input()}}).get());            // hit
  REQUIRE_FALSE(rt.infer({"a", {input(1, 3)}}).get());  // error: wrong width
  REQUIRE_FALSE(rt.infer({"nope", {input()}}).get());   // error: unknown
  auto s = text();
  CHECK(s.at("warm_requests_total{outcome=\"hit\"}") == 1);
  CHECK(s.at("warm_requests_total{outcome=\"miss\"}") == 1);
  CHECK(s.at("warm_requests_total{outcome=\"error\"}") == 2);
  CHECK(s.at("warm_cache_miss_wait_seconds_count") == 1);
  CHECK(s.at("warm_load_seconds_count") == 1);
  CHECK(s.at("warm_load_queue_wait_seconds_count") == 1);
  CHECK(s.at("warm_loads_started_total") == 1);
  CHECK(s.at("warm_models_loaded{device=\"host\"}") == 1);
  CHECK(s.at("warm_device_used_bytes{device=\"host\"}") == small_model_bytes);

  f.time->advance(std::chrono::seconds(1));
  REQUIRE(rt.infer({"b", {input()}}).get());
  f.time->advance(std::chrono::seconds(90));
  REQUIRE(rt.infer({"c", {input()}}).get());  // lru evicts a, resident 91 s
  REQUIRE(eventually(
      [&] { return text().at("warm_evictions_total{device=\"host\",reason=\"capacity\"}") == 1; }));
  s = text();
  CHECK(s.at("warm_age_at_eviction_seconds_count") == 1);
  CHECK(s.at("warm_age_at_eviction_seconds_bucket{le=\"60\"}") == 0);
  CHECK(s.at("warm_age_at_eviction_seconds_bucket{le=\"120\"}") == 1);
  CHECK(s.at("warm_models_loaded{device=\"host\"}") == 2);

  REQUIRE(rt.unload("c").get());
  REQUIRE(eventually(
      [&] { return text().at("warm_evictions_total{device=\"host\",reason=\"unload\"}") == 1; }));
  CHECK(state_of(rt, "c") == model_state::not_loaded);
  CHECK(text().at("warm_models_loaded{device=\"host\"}") == 1);

  REQUIRE(state_of(rt, "a") == model_state::not_loaded);
  CHECK(state_of(rt, "b") == model_state::loaded);
  f.loader->fail("a");
  REQUIRE_FALSE(rt.infer({"a", {input()}}).get());
  CHECK(text().at("warm_load_failures_total") >= 1);
  REQUIRE(rt.unregister_model("c").get());
  REQUIRE(eventually([&] { return text().at("warm_models_registered") == 2; }));
}

TEST_CASE("per-model series appear only when asked for") {
  runtime_fixture f({"a"});
  f.register_all();
  REQUIRE(f.rt->infer({"a", {input()}}).get());
  REQUIRE(f.rt->infer({"a", {input()}}).get());
  auto plain = prometheus_text(f.rt->metrics(), f.rt->devices());
  CHECK(plain.find("warm_model_") == std::string::npos);
  auto models = f.rt->list_models().get();
  REQUIRE(models);
  prometheus_options o;
  o.models = &*models;
  auto s = samples(prometheus_text(f.rt->metrics(), f.rt->devices(), o));
  CHECK(s.at("warm_model_requests_total{model=\"a\",outcome=\"hit\"}") == 1);
  CHECK(s.at("warm_model_requests_total{model=\"a\",outcome=\"miss\"}") == 1);
  CHECK(s.at("warm_model_loaded{model=\"a\"}") == 1);
  CHECK(s.at("warm_model_loads_total{model=\"a\"}") == 1);
}
