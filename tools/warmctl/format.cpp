#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "tensor_values.hpp"
#include "warm/units.hpp"

namespace warm::ctl {
namespace {

// Policy scores span many magnitudes (GDSF priorities are seconds per byte): 4 significant digits.
std::string score_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

std::string fixed(double value, int digits = 1) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string idle_text(double seconds) {
  return seconds < 0 ? "-" : fixed(seconds) + "s";
}
std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}
std::string state_text(model_state s) {
  return std::string(to_string(s));
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

json nullable_error(const std::optional<warm::error>& err) {
  return err ? to_json(*err) : json(nullptr);
}

json queue_json(const inspection& s) {
  json queued = json::array(), running = json::array();
  for (const auto& q : s.queue)
    queued.push_back({{"model", q.model},
                      {"waiting", q.waiting},
                      {"age_ms", q.age_ms},
                      {"attempts", q.attempts},
                      {"waiters", q.waiters}});
  for (const auto& r : s.running)
    running.push_back({{"model", r.model},
                       {"device", r.device},
                       {"phase", r.phase},
                       {"attempt", r.attempt},
                       {"waiters", r.waiters},
                       {"elapsed_ms", r.elapsed_ms},
                       {"bytes", r.bytes}});
  return {
      {"queue", queued}, {"running", running}, {"max_concurrent_loads", s.max_concurrent_loads}};
}

json resident_json(const device_info& d) {
  json resident = json::array();
  for (const auto& r : d.resident)
    resident.push_back({{"model", r.model},
                        {"bytes", r.bytes},
                        {"in_flight", r.in_flight},
                        {"uses", r.uses},
                        {"idle_seconds", r.idle_seconds},
                        {"score", r.score},
                        {"predicted", r.predicted},
                        {"measured", r.measured}});
  return resident;
}

json device_json(const device_info& d) {
  json out = {{"name", d.name},
              {"policy", d.policy},
              {"capacity", d.capacity},
              {"used", d.used},
              {"draining", d.draining},
              {"evictions", d.evictions},
              {"score_swaps", d.score_swaps},
              {"resident", resident_json(d)}};
  if (!d.state.empty()) out["state"] = d.state;  // model runtimes, host pools
  return out;
}

json failures_json(const inspection& s) {
  json out = json::array();
  for (const auto& f : s.failures)
    out.push_back({{"model", f.model},
                   {"device", f.device},
                   {"error", to_json(f.error)},
                   {"age_seconds", f.age_seconds},
                   {"expires_in_seconds", f.expires_in_seconds}});
  return out;
}

void print_devices(std::ostream& out, const inspection& s) {
  table t({"DEVICE", "POLICY", "CAPACITY", "USED", "DRAINING", "RESIDENT", "EVICTIONS"});
  for (const auto& d : s.devices)
    t.add({d.name, d.policy, format_bytes(d.capacity), format_bytes(d.used),
           format_bytes(d.draining), std::to_string(d.resident.size()),
           std::to_string(d.evictions)});
  t.print(out);
  // Model runtimes say how their process is doing, one line each.
  for (const auto& d : s.devices)
    if (!d.state.empty()) out << d.name << ": " << d.state << "\n";
}

void print_cache(std::ostream& out, const inspection& s) {
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    const auto& d = s.devices[i];
    out << (i ? "\n" : "") << d.name << " (" << d.policy << ", " << format_bytes(d.used) << " of "
        << format_bytes(d.capacity) << "), resident in eviction order (next victim first):\n";
    // SIZE is what the model is charged; PREDICTED what was reserved before it loaded; MEASURED
    // what the load measured ("exact" for backends whose charge is their buffer).
    table t({"MODEL", "SIZE", "PREDICTED", "MEASURED", "SCORE", "IN_FLIGHT", "USES", "IDLE"});
    for (const auto& r : d.resident)
      t.add({r.model, format_bytes(r.bytes), format_bytes(r.predicted),
             r.measured ? format_bytes(r.measured) : "exact", score_text(r.score),
             std::to_string(r.in_flight), std::to_string(r.uses), idle_text(r.idle_seconds)});
    t.print(out);
  }
}

void print_queue(std::ostream& out, const inspection& s) {
  out << "queued loads (start order):\n";
  table q({"MODEL", "KIND", "AGE", "ATTEMPTS", "WAITERS"});
  for (const auto& l : s.queue)
    q.add({l.model, l.waiting ? "waiting" : "proactive", fixed(l.age_ms) + "ms",
           std::to_string(l.attempts), std::to_string(l.waiters)});
  q.print(out);
  out << "running loads (max " << s.max_concurrent_loads << "):\n";
  table r({"MODEL", "DEVICE", "PHASE", "ATTEMPT", "WAITERS", "ELAPSED"});
  for (const auto& l : s.running)
    r.add({l.model, l.device, l.phase, std::to_string(l.attempt), std::to_string(l.waiters),
           fixed(l.elapsed_ms) + "ms"});
  r.print(out);
}

void print_failures(std::ostream& out, const inspection& s) {
  table t({"MODEL", "DEVICE", "CODE", "AGE", "EXPIRES_IN", "MESSAGE"});
  for (const auto& f : s.failures)
    t.add({f.model, or_dash(f.device), std::string(to_string(f.error.code)),
           fixed(f.age_seconds) + "s", fixed(f.expires_in_seconds) + "s", f.error.message});
  t.print(out);
}

}  // namespace

void table::print(std::ostream& out) const {
  std::vector<std::size_t> widths;
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  for (const auto& row : rows_) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

std::string dump_json(const json& doc, int indent) {
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

json to_json(const warm::error& err) {
  return {{"code", to_string(err.code)}, {"message", err.message}};
}

namespace {

// A model's own batching settings; null when it has none (the daemon's apply).
json batching_json(const std::optional<batching_options>& b) {
  if (!b) return nullptr;
  return {{"max_batch", b->max_batch},
          {"max_queue_delay_us", b->max_queue_delay.count()},
          {"preferred_batch", b->preferred_batch},
          {"max_queue", b->max_queue}};
}

std::string batching_text(const std::optional<batching_options>& b) {
  if (!b) return "the daemon's";
  if (!b->enabled()) return "off";
  std::string text = "up to " + std::to_string(b->max_batch) + " rows, delay " +
                     std::to_string(b->max_queue_delay.count()) + "us";
  if (!b->preferred_batch.empty()) {
    text += ", preferred";
    for (std::size_t k = 0; k < b->preferred_batch.size(); ++k)
      text += (k ? "," : " ") + std::to_string(b->preferred_batch[k]);
  }
  return text + ", queue " + std::to_string(b->max_queue);
}

}  // namespace

namespace {

// [{"name", "dtype", "shape"}]; dtype null and shape [] for a tensor the model does not declare.
json tensor_specs_json(const std::vector<tensor_spec>& specs) {
  json list = json::array();
  for (const auto& spec : specs)
    list.push_back({{"name", spec.name},
                    {"dtype", spec.known ? json(std::string(to_string(spec.type))) : json(nullptr)},
                    {"shape", spec.known ? json(spec.shape) : json::array()}});
  return list;
}

// "input F32 [-1, 16]; mask F32 [-1, 6]", or "-" when none are known.
std::string tensor_specs_text(const std::vector<tensor_spec>& specs) {
  std::string text;
  for (const auto& spec : specs)
    text += (text.empty() ? "" : "; ") + describe(spec);
  return text.empty() ? "-" : text;
}

}  // namespace

json to_json(const model_status& s) {
  json doc{{"id", s.id},
           {"state", to_string(s.state)},
           {"device", s.device},
           {"bytes", s.bytes},
           {"requests", s.requests},
           {"hits", s.hits},
           {"requests_per_second", s.requests_per_second},
           {"in_flight", s.in_flight},
           {"idle_seconds", s.idle_seconds},
           {"loads",
            {{"count", s.loads.count},
             {"mean_ms", s.loads.mean_ms},
             {"stddev_ms", std::sqrt(s.loads.variance_ms2)}}},
           {"last_error", nullable_error(s.last_error)},
           {"retry_in_seconds", s.retry_in_seconds},
           {"input_width", s.input_width},
           {"output_width", s.output_width},
           {"kind", s.kind},
           {"inputs", tensor_specs_json(s.io.inputs)},
           {"outputs", tensor_specs_json(s.io.outputs)},
           {"batched", s.io.batched},
           {"batching", batching_json(s.batching)},
           {"version", s.version ? json(*s.version) : json(nullptr)}};
  add_tier_fields(doc, s);
  return doc;
}

json to_json(const vmodel_status& s) {
  return {{"id", s.id},
          {"state", to_string(s.state)},
          {"active", s.active},
          {"target", s.target},
          {"active_state", to_string(s.active_state)},
          {"target_state", to_string(s.target_state)},
          {"error", nullable_error(s.error)}};
}

json to_json(const infer_result& r) {
  json outputs = json::array();
  for (const auto& t : r.outputs) {
    json o = {{"name", t.name}, {"dtype", to_string(t.type)}, {"shape", t.shape}};
    json data = json::array();
    for (std::size_t i = 0, n = element_count(t); i < n; ++i)
      data.push_back(element_json(t, i));
    o["data"] = std::move(data);
    outputs.push_back(std::move(o));
  }
  return {{"model", r.model},
          {"cache_hit", r.cache_hit},
          {"load_wait_ms", r.load_wait_ms},
          {"outputs", outputs}};
}

json to_json(const model_event& e) {
  return {{"sequence", e.sequence},      {"model", e.model},   {"previous", to_string(e.previous)},
          {"state", to_string(e.state)}, {"device", e.device}, {"error", nullable_error(e.error)},
          {"reason", e.reason}};
}

json to_json(const inspection& s) {
  json devices = json::array(), models = json::array();
  for (const auto& d : s.devices)
    devices.push_back(device_json(d));
  for (const auto& m : s.models)
    models.push_back(to_json(m));
  auto q = queue_json(s);
  return {{"registered_models", s.registered_models},
          {"vmodels", s.vmodels},
          {"max_concurrent_loads", s.max_concurrent_loads},
          {"loads_started", s.loads_started},
          {"loads_failed", s.loads_failed},
          {"importance_rebuilds", s.importance_rebuilds},
          {"importance_rebuild_seconds", s.importance_rebuild_seconds},
          {"devices", devices},
          {"queue", q["queue"]},
          {"running", q["running"]},
          {"failures", failures_json(s)},
          {"models", models},
          {"tier", to_json(s.tier)}};
}

json inspection_section(const inspection& s, std::string_view section) {
  if (section == "devices") {
    json devices = json::array();
    for (const auto& d : s.devices) {
      auto j = device_json(d);
      j.erase("resident");
      j["resident_count"] = d.resident.size();
      devices.push_back(std::move(j));
    }
    return {{"devices", devices}};
  }
  if (section == "cache") {
    json devices = json::array();
    for (const auto& d : s.devices)
      devices.push_back({{"name", d.name},
                         {"policy", d.policy},
                         {"used", d.used},
                         {"capacity", d.capacity},
                         {"resident", resident_json(d)}});
    return {{"devices", devices}};
  }
  if (section == "queue") return queue_json(s);
  if (section == "failures") return {{"failures", failures_json(s)}};
  if (section == "models") return {{"models", to_json(s)["models"]}};
  if (section == "tier") return {{"tier", to_json(s.tier)}};
  return to_json(s);
}

void print_model_status(std::ostream& out, const model_status& s, const std::string& vmodel) {
  table t = vmodel.empty() ? table({"id:", s.id}) : table({"vmodel:", vmodel});
  if (!vmodel.empty()) t.add({"id:", s.id});
  t.add({"state:", state_text(s.state)});
  t.add({"device:", or_dash(s.device)});
  t.add({"size:",
         s.bytes ? format_bytes(s.bytes) + " (" + std::to_string(s.bytes) + " bytes)" : "-"});
  t.add({"kind:", or_dash(s.kind)});
  t.add({"version:", s.version ? std::to_string(*s.version) : "-"});
  add_tier_rows(t, s);
  t.add({"inputs:", tensor_specs_text(s.io.inputs)});
  t.add({"outputs:", tensor_specs_text(s.io.outputs)});
  t.add({"batching:", batching_text(s.batching)});
  t.add({"requests:", std::to_string(s.requests) + " (" + std::to_string(s.hits) + " hits), " +
                          fixed(s.requests_per_second, 2) + "/s, " + std::to_string(s.in_flight) +
                          " in flight"});
  t.add({"idle:", idle_text(s.idle_seconds)});
  t.add({"loads:", std::to_string(s.loads.count) + ", mean " + fixed(s.loads.mean_ms) +
                       "ms, stddev " + fixed(std::sqrt(s.loads.variance_ms2)) + "ms"});
  if (s.last_error)
    t.add({"last error:",
           s.last_error->to_string() + " (retry in " + fixed(s.retry_in_seconds) + "s)"});
  t.print(out);
}

void print_models(std::ostream& out, const std::vector<model_status>& models) {
  table t({"ID", "STATE", "DEVICE", "SIZE", "REQUESTS", "HITS", "RPS", "IDLE"});
  for (const auto& m : models)
    t.add({m.id, state_text(m.state), or_dash(m.device), m.bytes ? format_bytes(m.bytes) : "-",
           std::to_string(m.requests), std::to_string(m.hits), fixed(m.requests_per_second, 2),
           idle_text(m.idle_seconds)});
  t.print(out);
}

void print_vmodel_status(std::ostream& out, const vmodel_status& s) {
  table t({"vmodel:", s.id});
  t.add({"state:", std::string(to_string(s.state))});
  t.add({"active:", or_dash(s.active) + " (" + state_text(s.active_state) + ")"});
  t.add({"target:", or_dash(s.target) + " (" + state_text(s.target_state) + ")"});
  if (s.error) t.add({"error:", s.error->to_string()});
  t.print(out);
}

void print_infer_result(std::ostream& out, const infer_result& r) {
  out << "model: " << r.model << ", " << (r.cache_hit ? "cache hit" : "cache miss")
      << ", load wait " << fixed(r.load_wait_ms) << "ms\n";
  constexpr std::size_t shown = 8;
  for (const auto& t : r.outputs) {
    out << t.name << " " << to_string(t.type) << " " << shape_text(t.shape) << "\n";
    const std::size_t count = element_count(t);
    std::size_t width = t.shape.empty() ? count : static_cast<std::size_t>(t.shape.back());
    if (width == 0) continue;
    for (std::size_t row = 0; row * width < count; ++row) {
      out << " ";
      for (std::size_t c = 0; c < std::min(width, shown) && row * width + c < count; ++c)
        out << " " << element_text(t, row * width + c);
      if (width > shown) out << " ... (" << width << " values)";
      out << "\n";
    }
  }
}

void print_inspection(std::ostream& out, const inspection& s, std::string_view section) {
  if (section == "devices") return print_devices(out, s);
  if (section == "cache") return print_cache(out, s);
  if (section == "queue") return print_queue(out, s);
  if (section == "failures") return print_failures(out, s);
  if (section == "models") return print_models(out, s.models);
  if (section == "tier") return print_tier(out, s.tier);
  out << s.registered_models << " registered models, " << s.vmodels
      << " vmodels; loads: " << s.loads_started << " started, " << s.loads_failed
      << " failed; importance rebuilds: " << s.importance_rebuilds << " (last "
      << fixed(s.importance_rebuild_seconds * 1000, 2) << "ms)\n\n";
  print_devices(out, s);
  out << "\n";
  print_cache(out, s);
  out << "\n";
  print_queue(out, s);
  out << "\nfailures:\n";
  print_failures(out, s);
  out << "\nmodels in use:\n";
  print_models(out, s.models);
  if (s.tier.open) {
    out << "\n";
    print_tier(out, s.tier);
  }
}

json to_json(const cluster_info& c) {
  json instances = json::array();
  for (const auto& x : c.instances)
    instances.push_back({{"name", x.name},
                         {"address", x.address},
                         {"version", x.version},
                         {"self", x.self},
                         {"draining", x.draining},
                         {"capacity", x.capacity},
                         {"used", x.used},
                         {"models_loaded", x.models_loaded},
                         {"loads_in_flight", x.loads_in_flight},
                         {"loading_threads", x.loading_threads},
                         {"started_unix", x.started_unix},
                         {"updated_seconds_ago", x.updated_seconds_ago},
                         {"residents", x.residents},
                         {"loading", x.loading},
                         {"tiered", x.tiered}});
  json copies = json::object();
  for (const auto& x : c.instances)
    for (const auto& m : x.residents)
      copies[m].push_back(x.name);
  return json{{"enabled", c.enabled},
              {"name", c.name},
              {"instance", c.instance},
              {"joined", c.joined},
              {"last_error", c.last_error},
              {"endpoints", c.endpoints},
              {"instances", std::move(instances)},
              {"copies", std::move(copies)},
              {"forwarded", c.forwarded},
              {"fell_back", c.fell_back},
              {"placed", c.placed},
              {"claims_lost", c.claims_lost}};
}

cluster_copies copies_of(const cluster_info& c, const std::string& model) {
  cluster_copies out;
  for (const auto& x : c.instances) {
    if (std::binary_search(x.residents.begin(), x.residents.end(), model))
      out.copies.push_back(x.name);
    if (std::binary_search(x.loading.begin(), x.loading.end(), model))
      out.loading.push_back(x.name);
    if (std::binary_search(x.tiered.begin(), x.tiered.end(), model)) out.tiered.push_back(x.name);
  }
  return out;
}

json to_json(const model_status& s, const cluster_copies& where) {
  auto j = to_json(s);
  j["copies"] = where.copies;
  j["cluster_loads"] = where.loading.size();
  j["loading_on"] = where.loading;
  j["tiered_on"] = where.tiered;
  return j;
}

void print_copies(std::ostream& out, const cluster_copies& where) {
  auto names = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& n : v)
      s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? std::string("none") : s;
  };
  out << "copies: " << where.copies.size() << " (" << names(where.copies) << ")\n";
  out << "cluster loads: " << where.loading.size() << " (" << names(where.loading) << ")\n";
  if (!where.tiered.empty())
    out << "disk tiers: " << where.tiered.size() << " (" << names(where.tiered) << ")\n";
}

void print_cluster(std::ostream& out, const cluster_info& c) {
  if (!c.enabled) {
    out << "alone: this warmd is not in a cluster (warmd --cluster)\n";
    return;
  }
  out << "cluster " << c.name << ", instance " << c.instance
      << (c.joined ? " (joined)" : " (not joined)") << ", " << c.instances.size()
      << " instance(s) live\n";
  if (!c.last_error.empty()) out << "etcd: " << c.last_error << "\n";
  table t({"name", "address", "capacity", "used", "models", "loads", "draining", "updated"});
  for (const auto& x : c.instances)
    t.add({x.name + (x.self ? " *" : ""), x.address, format_bytes(x.capacity), format_bytes(x.used),
           std::to_string(x.models_loaded),
           std::to_string(x.loads_in_flight) + "/" + std::to_string(x.loading_threads),
           x.draining ? "yes" : "no", fixed(x.updated_seconds_ago, 1) + "s ago"});
  t.print(out);
  out << "\nthis instance: forwarded " << c.forwarded << " (fell back " << c.fell_back
      << "), placed " << c.placed << ", claims lost " << c.claims_lost << "\n";
  std::map<std::string, std::pair<std::string, std::string>> models;  // model -> (holding, loading)
  auto add = [](std::string& list, const std::string& name) {
    list += (list.empty() ? "" : ",") + name;
  };
  for (const auto& x : c.instances) {
    for (const auto& m : x.residents)
      add(models[m].first, x.name);
    for (const auto& m : x.loading)
      add(models[m].second, x.name);
  }
  if (models.empty()) return;
  out << "\ncopies:\n";
  table where({"model", "copies", "on", "loading"});
  for (const auto& [model, on] : models) {
    auto count = on.first.empty() ? 0 : 1 + std::count(on.first.begin(), on.first.end(), ',');
    where.add({model, std::to_string(count), on.first.empty() ? "-" : on.first,
               on.second.empty() ? "-" : on.second});
  }
  where.print(out);
}

std::string event_line(const model_event& e) {
  std::string line = "#" + std::to_string(e.sequence) + " " + e.model + " " +
                     state_text(e.previous) + " -> " + state_text(e.state);
  const bool left = e.previous == model_state::loaded && e.state != model_state::loaded;
  if (!e.device.empty()) line += (left ? " from " : " on ") + e.device;
  if (!e.reason.empty()) line += " (" + e.reason + ")";
  if (e.error) line += " (" + e.error->to_string() + ")";
  return line;
}

}  // namespace warm::ctl
