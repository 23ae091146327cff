#include "console/feed.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace warm::console {

using json = nlohmann::json;

namespace {

// A finite double, or 0: JSON has no NaN or infinity.
double finite(double v) {
  return std::isfinite(v) ? v : 0;
}

template <class T, class F>
json bounded_array(const std::vector<T>& items, std::size_t max, F&& encode) {
  json out = json::array();
  for (std::size_t i = 0; i < items.size() && i < max; ++i)
    out.push_back(encode(items[i]));
  return out;
}

json strings(const std::vector<std::string>& items) {
  return bounded_array(items, max_residents, [](const std::string& s) { return json(s); });
}

json encode_device(const device_info& d) {
  std::uint64_t resident = 0;
  for (const auto& r : d.resident)
    resident += r.bytes;
  const auto accounted = resident + d.draining;
  json out{{"name", d.name},
           {"policy", d.policy},
           {"capacity", d.capacity},
           {"used", d.used},
           {"reserved", d.used > accounted ? d.used - accounted : 0},
           {"draining", d.draining},
           {"evictions", d.evictions},
           {"state", d.state},
           {"residents_total", d.resident.size()}};
  out["residents"] = bounded_array(d.resident, max_residents, [](const resident_info& r) {
    return json{{"model", r.model},         {"bytes", r.bytes},
                {"uses", r.uses},           {"idle_seconds", finite(r.idle_seconds)},
                {"in_flight", r.in_flight}, {"score", finite(r.score)}};
  });
  return out;
}

json encode_cluster(const cluster_info& c) {
  json out{{"name", c.name},           {"instance", c.instance},
           {"joined", c.joined},       {"last_error", c.last_error},
           {"forwarded", c.forwarded}, {"fell_back", c.fell_back},
           {"placed", c.placed},       {"claims_lost", c.claims_lost}};
  out["instances"] = bounded_array(c.instances, max_list, [](const cluster_instance& i) {
    return json{{"name", i.name},
                {"address", i.address},
                {"self", i.self},
                {"draining", i.draining},
                {"capacity", i.capacity},
                {"used", i.used},
                {"models_loaded", i.models_loaded},
                {"loads_in_flight", i.loads_in_flight},
                {"updated_seconds_ago", finite(i.updated_seconds_ago)},
                {"residents", strings(i.residents)},
                {"loading", strings(i.loading)}};
  });
  return out;
}

// Parses a whole decimal number in [lo, hi].
template <class T>
std::optional<T> number_in(const std::string& text, T lo, T hi) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (!(value >= lo && value <= hi)) return std::nullopt;
  return value;
}

// Each parameter at most once, each one known.
expected<void> check_names(const query_params& params, std::initializer_list<const char*> known) {
  std::vector<std::string> seen;
  for (const auto& [name, value] : params) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return name == k; }))
      return make_error(errc::invalid_argument, "unknown parameter '" + name.substr(0, 64) + "'");
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      return make_error(errc::invalid_argument, "parameter '" + name + "' given twice");
    seen.push_back(name);
  }
  return {};
}

}  // namespace

expected<feed_query> parse_feed_query(const query_params& params) {
  if (auto ok = check_names(params, {"events_after", "series_after"}); !ok) return ok.error();
  feed_query q;
  for (const auto& [name, value] : params) {
    if (name == "events_after") {
      auto n = number_in<std::uint64_t>(value, 0, UINT64_MAX);
      if (!n) return make_error(errc::invalid_argument, "events_after must be an event number");
      q.events_after = *n;
    } else {
      // Unix seconds: a whole number (the points' t), at most 2^40.
      auto n = number_in<std::int64_t>(value, 0, std::int64_t(1) << 40);
      if (!n)
        return make_error(errc::invalid_argument,
                          "series_after must be a time in whole unix seconds");
      q.series_after = static_cast<double>(*n);
    }
  }
  return q;
}

expected<models_query> parse_models_query(const query_params& params) {
  if (auto ok = check_names(params, {"after", "limit"}); !ok) return ok.error();
  models_query q;
  for (const auto& [name, value] : params) {
    if (name == "after") {
      if (value.size() > 1024)
        return make_error(errc::invalid_argument, "after must be a model id (at most 1 KiB)");
      q.after = value;
    } else {
      auto n = number_in<std::uint32_t>(value, 1, max_models_page);
      if (!n)
        return make_error(errc::invalid_argument,
                          "limit must be a number from 1 to " + std::to_string(max_models_page));
      q.limit = *n;
    }
  }
  return q;
}

std::string encode_feed(const snapshot& s, const std::vector<point>& points,
                        const std::vector<event>& events, std::uint64_t events_last) {
  const auto& st = s.state;
  const auto& c = s.counters;
  std::uint64_t loaded = 0;
  for (const auto& d : st.devices)
    loaded += d.resident.size();
  json out{
      {"time", s.unix_seconds}, {"version", "0.1.0"}, {"uptime_seconds", finite(s.uptime_seconds)}};
  out["totals"] = json{{"registered", st.registered_models},
                       {"vmodels", st.vmodels},
                       {"loaded", loaded},
                       {"requests", c.hits + c.misses + c.errors},
                       {"hits", c.hits},
                       {"misses", c.misses},
                       {"errors", c.errors},
                       {"loads", c.loads},
                       {"load_failures", c.load_failures},
                       {"evictions", c.evictions},
                       {"load_bytes", c.load_bytes}};
  out["devices"] = bounded_array(st.devices, st.devices.size(), encode_device);
  const auto& t = st.tier;
  out["tier"] = json{{"open", t.open},         {"capacity", t.capacity},  {"used", t.used},
                     {"reserved", t.reserved}, {"files", t.files},        {"hits", t.hits},
                     {"misses", t.misses},     {"evictions", t.evictions}};
  out["queue_total"] = st.queue.size();
  out["queue"] = bounded_array(st.queue, max_list, [](const queued_load& q) {
    return json{{"model", q.model},
                {"waiting", q.waiting},
                {"age_ms", finite(q.age_ms)},
                {"attempts", q.attempts},
                {"waiters", q.waiters}};
  });
  out["running_total"] = st.running.size();
  out["running"] = bounded_array(st.running, max_list, [](const running_load& r) {
    return json{{"model", r.model},     {"device", r.device},
                {"phase", r.phase},     {"attempt", r.attempt},
                {"waiters", r.waiters}, {"elapsed_ms", finite(r.elapsed_ms)},
                {"bytes", r.bytes}};
  });
  out["failures_total"] = st.failures.size();
  out["failures"] = bounded_array(st.failures, max_list, [](const failure_info& f) {
    return json{{"model", f.model},
                {"device", f.device},
                {"code", std::string(to_string(f.error.code))},
                {"error", f.error.message},
                {"age_seconds", finite(f.age_seconds)},
                {"expires_in_seconds", finite(f.expires_in_seconds)}};
  });
  json series_points = json::array();
  for (const auto& p : points)
    series_points.push_back(json{{"t", p.t},
                                 {"requests_per_second", finite(p.requests_per_second)},
                                 {"hit_ratio", finite(p.hit_ratio)},
                                 {"loads_per_second", finite(p.loads_per_second)},
                                 {"evictions_per_second", finite(p.evictions_per_second)},
                                 {"load_bytes_per_second", finite(p.load_bytes_per_second)},
                                 {"p50_ms", finite(p.p50_ms)},
                                 {"p99_ms", finite(p.p99_ms)}});
  out["series"] = json{{"interval_seconds", 1}, {"points", std::move(series_points)}};
  out["events_last"] = events_last;
  out["events"] = bounded_array(events, max_events, [](const event& e) {
    return json{{"seq", e.seq},       {"t", e.unix_seconds}, {"model", e.model},
                {"kind", e.kind},     {"from", e.from},      {"to", e.to},
                {"device", e.device}, {"reason", e.reason},  {"error", e.error}};
  });
  out["cluster"] = s.cluster && s.cluster->enabled ? encode_cluster(*s.cluster) : json(nullptr);
  // Strings from model files and peers may hold anything: invalid UTF-8 is replaced, not thrown.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encode_models(const std::vector<model_status>& models,
                          const std::optional<std::string>& next) {
  json rows = json::array();
  for (const auto& m : models) {
    std::string batching;
    if (m.batching && m.batching->enabled())
      batching = std::to_string(m.batching->max_batch) + "/" +
                 std::to_string(m.batching->max_queue_delay.count());
    rows.push_back(json::array(
        {m.id, std::string(to_string(m.state)), m.device,
         m.version ? json(*m.version) : json(nullptr), m.bytes, finite(m.requests_per_second),
         m.requests, m.hits, m.loads.count, finite(m.loads.mean_ms), batching, m.kind, m.in_flight,
         finite(m.idle_seconds), m.last_error ? m.last_error->message : std::string()}));
  }
  json out{{"columns",
            {"id", "state", "device", "version", "bytes", "requests_per_second", "requests", "hits",
             "loads", "mean_load_ms", "batching", "kind", "in_flight", "idle_seconds", "error"}},
           {"rows", std::move(rows)},
           {"next", next ? json(*next) : json(nullptr)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace warm::console
