#include "cluster/records.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace warm::cluster {
namespace {

using json = nlohmann::json;

bool allowed(std::string_view text, std::string_view extra) {
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

// Reads one field of a decoded record, naming the key and field on any mismatch.
class reader {
 public:
  reader(const char* kind, const std::string& key, const json& object)
      : kind_(kind), key_(key), object_(object) {}

  expected<std::string> text(const char* field) const {
    auto it = object_.find(field);
    if (it == object_.end() || !it->is_string()) return bad(field, "a string");
    return it->get<std::string>();
  }
  expected<bool> flag(const char* field) const {
    auto it = object_.find(field);
    if (it == object_.end() || !it->is_boolean()) return bad(field, "true or false");
    return it->get<bool>();
  }
  template <typename Int>
  expected<Int> integer(const char* field) const {
    auto it = object_.find(field);
    if (it == object_.end() || !it->is_number_integer()) return bad(field, "an integer");
    if (it->is_number_unsigned()) {
      auto v = it->get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<Int>::max()))
        return bad(field, "in range");
      return static_cast<Int>(v);
    }
    auto v = it->get<std::int64_t>();
    if (v < static_cast<std::int64_t>(std::numeric_limits<Int>::min()) ||
        (v > 0 && static_cast<std::uint64_t>(v) >
                      static_cast<std::uint64_t>(std::numeric_limits<Int>::max())))
      return bad(field, "in range");
    return static_cast<Int>(v);
  }
  expected<double> number(const char* field) const {
    auto it = object_.find(field);
    if (it == object_.end() || !it->is_number()) return bad(field, "a number");
    double v = it->get<double>();
    if (!std::isfinite(v) || v < 0) return bad(field, "a finite number >= 0");
    return v;
  }
  expected<const json*> array(const char* field) const {
    auto it = object_.find(field);
    if (it == object_.end() || !it->is_array()) return bad(field, "an array");
    return &*it;
  }

  error bad(const std::string& field, const std::string& what) const {
    return make_error(errc::invalid_argument,
                      std::string(kind_) + " at " + key_ + ": " + field + " must be " + what);
  }

 private:
  const char* kind_;  // "instance record", "placement claim"
  const std::string& key_;
  const json& object_;
};

#define WARM_TRY_SET(target, expr)                 \
  do {                                             \
    auto value_ = (expr);                          \
    if (!value_) return std::move(value_).error(); \
    target = std::move(*value_);                   \
  } while (0)

expected<device_record> decode_device(const std::string& key, const json& j, std::size_t index) {
  std::string where = key + " devices[" + std::to_string(index) + "]";
  if (!j.is_object())
    return make_error(errc::invalid_argument, "instance record at " + where + ": not an object");
  reader r("instance record", where, j);
  device_record d;
  WARM_TRY_SET(d.name, r.text("name"));
  WARM_TRY_SET(d.policy, r.text("policy"));
  WARM_TRY_SET(d.capacity, r.integer<std::uint64_t>("capacity"));
  WARM_TRY_SET(d.used, r.integer<std::uint64_t>("used"));
  WARM_TRY_SET(d.models, r.integer<std::uint32_t>("models"));
  WARM_TRY_SET(d.idle_seconds, r.number("idle_seconds"));
  const json* candidates = nullptr;
  WARM_TRY_SET(candidates, r.array("candidates"));
  for (std::size_t i = 0; i < candidates->size(); ++i) {
    const auto& c = (*candidates)[i];
    std::string field = "candidates[" + std::to_string(i) + "]";
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_unsigned() || !c[1].is_number())
      return r.bad(field, "[bytes, value]");
    double value = c[1].get<double>();
    if (!std::isfinite(value) || value < 0) return r.bad(field, "[bytes, value >= 0]");
    d.candidates.push_back({c[0].get<std::uint64_t>(), value});
  }
  return d;
}

// An optional list of model ids (absent: none).
expected<std::vector<std::string>> model_ids(const reader& r, const json& object,
                                             const char* field) {
  std::vector<std::string> out;
  auto it = object.find(field);
  if (it == object.end()) return out;
  if (!it->is_array()) return r.bad(field, "an array of model ids");
  for (const auto& id : *it) {
    if (!id.is_string()) return r.bad(field, "an array of model ids");
    out.push_back(id.get<std::string>());
  }
  return out;
}

// A record's list of tiered model ids: at most max_tiered_models, each a model id; sorted and
// made unique here (a peer's order is not trusted: tier_holds searches it).
expected<std::vector<std::string>> tiered_ids(const reader& r, const json& object) {
  auto ids = model_ids(r, object, "tiered");
  if (!ids) return ids;
  if (ids->size() > max_tiered_models)
    return r.bad("tiered", "at most " + std::to_string(max_tiered_models) + " model ids");
  for (const auto& id : *ids) {
    const bool valid =
        !id.empty() && id.size() <= 256 &&
        std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127 && c != '/'; });
    if (!valid) return r.bad("tiered", "an array of model ids");
  }
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  return ids;
}

void sort_unique(std::vector<std::string>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace

expected<std::string> cluster_root(std::string_view cluster) {
  if (cluster.empty() || cluster.size() > 64 || !allowed(cluster, "._-"))
    return make_error(errc::invalid_argument,
                      "cluster name \"" + std::string(cluster) +
                          "\" must be 1 to 64 characters of letters, digits, '.', '_' and '-'");
  return "/warm/" + std::string(cluster) + "/";
}

expected<void> check_instance_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || !allowed(name, "._:-"))
    return make_error(
        errc::invalid_argument,
        "instance name \"" + std::string(name) +
            "\" must be 1 to 128 characters of letters, digits, '.', '_', ':' and '-'");
  return {};
}

std::string instances_prefix(const std::string& root) {
  return root + "instances/";
}
std::string instance_key(const std::string& root, const std::string& name) {
  return instances_prefix(root) + name;
}

bool instance_record::holds(const std::string& model) const {
  return std::binary_search(residents.begin(), residents.end(), model);
}

bool instance_record::is_loading(const std::string& model) const {
  return std::binary_search(loading.begin(), loading.end(), model);
}

bool instance_record::tier_holds(const std::string& model) const {
  return std::binary_search(tiered.begin(), tiered.end(), model);
}

bool instance_record::same_state(const instance_record& o) const {
  auto same_devices = [&] {
    if (devices.size() != o.devices.size()) return false;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const auto &a = devices[i], &b = o.devices[i];
      if (a.name != b.name || a.policy != b.policy || a.capacity != b.capacity ||
          a.used != b.used || a.models != b.models || a.candidates.size() != b.candidates.size())
        return false;
      for (std::size_t k = 0; k < a.candidates.size(); ++k)
        if (a.candidates[k].bytes != b.candidates[k].bytes) return false;
    }
    return true;
  };
  // Ages and values drift by themselves; a record is republished for them at most at the
  // membership's refresh interval, not as a change.
  return name == o.name && address == o.address && version == o.version &&
         started_unix == o.started_unix && draining == o.draining &&
         loading_threads == o.loading_threads && loads_in_flight == o.loads_in_flight &&
         models_loaded == o.models_loaded && residents == o.residents && loading == o.loading &&
         hot == o.hot && tiered == o.tiered && same_devices();
}

std::string encode(const instance_record& r) {
  json devices = json::array();
  for (const auto& d : r.devices) {
    json candidates = json::array();
    for (const auto& c : d.candidates)
      candidates.push_back({c.bytes, c.value});
    devices.push_back({{"name", d.name},
                       {"policy", d.policy},
                       {"capacity", d.capacity},
                       {"used", d.used},
                       {"models", d.models},
                       {"idle_seconds", d.idle_seconds},
                       {"candidates", std::move(candidates)}});
  }
  json j{{"name", r.name},
         {"address", r.address},
         {"version", r.version},
         {"started_unix", r.started_unix},
         {"updated_unix", r.updated_unix},
         {"draining", r.draining},
         {"loading_threads", r.loading_threads},
         {"loads_in_flight", r.loads_in_flight},
         {"models_loaded", r.models_loaded},
         {"requests_per_second", r.requests_per_second},
         {"devices", std::move(devices)},
         {"residents", r.residents},
         {"loading", r.loading},
         {"hot", r.hot},
         {"tiered", r.tiered}};
  return j.dump();
}

expected<instance_record> decode_instance(const std::string& key, std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::invalid_argument, "instance record at " + key + ": not a JSON object");
  reader r("instance record", key, j);
  instance_record out;
  WARM_TRY_SET(out.name, r.text("name"));
  if (auto ok = check_instance_name(out.name); !ok) return r.bad("name", "a valid instance name");
  WARM_TRY_SET(out.address, r.text("address"));
  WARM_TRY_SET(out.version, r.text("version"));
  WARM_TRY_SET(out.started_unix, r.integer<std::int64_t>("started_unix"));
  WARM_TRY_SET(out.updated_unix, r.integer<std::int64_t>("updated_unix"));
  WARM_TRY_SET(out.draining, r.flag("draining"));
  WARM_TRY_SET(out.loading_threads, r.integer<std::uint32_t>("loading_threads"));
  WARM_TRY_SET(out.loads_in_flight, r.integer<std::uint32_t>("loads_in_flight"));
  WARM_TRY_SET(out.models_loaded, r.integer<std::uint64_t>("models_loaded"));
  const json* devices = nullptr;
  WARM_TRY_SET(devices, r.array("devices"));
  for (std::size_t i = 0; i < devices->size(); ++i) {
    auto d = decode_device(key, (*devices)[i], i);
    if (!d) return std::move(d).error();
    out.devices.push_back(std::move(*d));
  }
  WARM_TRY_SET(out.residents, model_ids(r, j, "residents"));
  WARM_TRY_SET(out.loading, model_ids(r, j, "loading"));
  WARM_TRY_SET(out.hot, model_ids(r, j, "hot"));
  WARM_TRY_SET(out.tiered, tiered_ids(r, j));
  if (auto rate = j.find("requests_per_second"); rate != j.end()) {
    if (!rate->is_number() || !(rate->get<double>() >= 0))
      return r.bad("requests_per_second", "a number, 0 or more");
    out.requests_per_second = rate->get<double>();
  }
  return out;
}

instance_record record_from(const inspection& state, std::string name, std::string address,
                            std::string version, std::int64_t started_unix, bool draining,
                            std::size_t candidates) {
  instance_record r;
  r.name = std::move(name);
  r.address = std::move(address);
  r.version = std::move(version);
  r.started_unix = started_unix;
  r.draining = draining;
  r.loading_threads = state.max_concurrent_loads;
  r.loads_in_flight = static_cast<std::uint32_t>(state.queue.size() + state.running.size());
  for (const auto& dev : state.devices) {
    device_record d;
    d.name = dev.name;
    d.policy = dev.policy;
    d.capacity = dev.capacity;
    d.used = dev.used;
    d.models = static_cast<std::uint32_t>(dev.resident.size());
    for (const auto& m : dev.resident) {
      d.idle_seconds = std::max(d.idle_seconds, m.idle_seconds);
      if (ranking::scores_are_values(dev.policy) && d.candidates.size() < candidates)
        d.candidates.push_back({m.bytes, m.score});
    }
    r.models_loaded += dev.resident.size();
    for (const auto& m : dev.resident)
      r.residents.push_back(m.model);
    r.devices.push_back(std::move(d));
  }
  sort_unique(r.residents);
  for (const auto& m : state.models)
    r.requests_per_second += m.requests_per_second;
  for (const auto& q : state.queue)
    r.loading.push_back(q.model);
  for (const auto& l : state.running)
    r.loading.push_back(l.model);
  sort_unique(r.loading);
  for (auto& m : recent_models(state, 60, 32))
    r.hot.push_back(std::move(m.model));
  sort_unique(r.hot);
  for (const auto& held : state.tier.held)
    r.tiered.insert(r.tiered.end(), held.models.begin(), held.models.end());
  sort_unique(r.tiered);
  if (r.tiered.size() > max_tiered_models) r.tiered.resize(max_tiered_models);
  return r;
}

std::vector<recent_model> recent_models(const inspection& state, double idle_limit_seconds,
                                        std::size_t limit) {
  struct entry {
    recent_model m;
    bool valued = false;
    double value = 0, idle = 0;
  };
  std::vector<entry> found;
  for (const auto& d : state.devices) {
    const bool valued = ranking::scores_are_values(d.policy);
    for (const auto& r : d.resident)
      if (r.in_flight > 0 || r.idle_seconds <= idle_limit_seconds)
        found.push_back({{r.model, r.bytes}, valued, r.score, r.idle_seconds});
  }
  std::sort(found.begin(), found.end(), [](const entry& a, const entry& b) {
    if (a.valued != b.valued) return a.valued;
    if (a.valued && a.value != b.value) return a.value > b.value;
    return a.idle < b.idle;
  });
  std::vector<recent_model> out;
  for (auto& e : found) {
    if (limit != 0 && out.size() == limit) break;
    if (std::none_of(out.begin(), out.end(),
                     [&](const recent_model& m) { return m.model == e.m.model; }))
      out.push_back(std::move(e.m));
  }
  return out;
}

ranking::instance_view view_of(const instance_record& r) {
  ranking::instance_view v;
  const device_record* roomiest = nullptr;
  for (const auto& d : r.devices)
    if (!roomiest || (d.capacity - std::min(d.used, d.capacity)) >
                         (roomiest->capacity - std::min(roomiest->used, roomiest->capacity)))
      roomiest = &d;
  if (roomiest) {
    v.capacity = roomiest->capacity;
    v.used = roomiest->used;
    v.models = roomiest->models;
    v.idle_seconds = roomiest->idle_seconds;
    v.candidates = roomiest->candidates;
  }
  v.loads_in_flight = r.loads_in_flight;
  v.loading_threads = std::max<std::uint32_t>(r.loading_threads, 1);
  v.draining = r.draining;
  return v;
}

std::string placement_prefix(const std::string& root) {
  return root + "placement/";
}
std::string claims_prefix(const std::string& root) {
  return placement_prefix(root) + "claims/";
}
std::string claim_key(const std::string& root, const std::string& model) {
  return claims_prefix(root) + model;
}
std::string placed_prefix(const std::string& root) {
  return placement_prefix(root) + "instances/";
}
std::string placed_key(const std::string& root, const std::string& instance) {
  return placed_prefix(root) + instance;
}

std::string encode(const placement_claim& c) {
  return json{{"instance", c.instance},
              {"by", c.by},
              {"bytes", c.bytes},
              {"claimed_unix_ms", c.claimed_unix_ms}}
      .dump();
}

std::string encode_placed(const std::string& model) {
  return json{{"model", model}}.dump();
}

std::string copies_prefix(const std::string& root) {
  return placement_prefix(root) + "copies/";
}
std::string copies_key(const std::string& root, const std::string& model) {
  return copies_prefix(root) + model;
}

std::string encode(const copies_change& c) {
  return json{{"copies", c.copies}, {"by", c.by}, {"changed_unix_ms", c.changed_unix_ms}}.dump();
}

expected<copies_change> decode_copies(const std::string& key, std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::invalid_argument, "copies change at " + key + ": not a JSON object");
  reader r("copies change", key, j);
  copies_change out;
  WARM_TRY_SET(out.copies, r.integer<std::uint32_t>("copies"));
  WARM_TRY_SET(out.by, r.text("by"));
  if (auto ok = check_instance_name(out.by); !ok) return r.bad("by", "a valid instance name");
  WARM_TRY_SET(out.changed_unix_ms, r.integer<std::int64_t>("changed_unix_ms"));
  return out;
}

std::string failures_prefix(const std::string& root) {
  return placement_prefix(root) + "failures/";
}
std::string failure_key(const std::string& root, const std::string& model,
                        const std::string& instance) {
  return failures_prefix(root) + model + "/" + instance;
}

std::string encode(const placement_failure& f) {
  return json{{"error", f.error}, {"failed_unix_ms", f.failed_unix_ms}}.dump();
}

expected<placement_failure> decode_failure(const std::string& key, std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::invalid_argument,
                      "placement failure at " + key + ": not a JSON object");
  reader r("placement failure", key, j);
  placement_failure out;
  WARM_TRY_SET(out.error, r.text("error"));
  WARM_TRY_SET(out.failed_unix_ms, r.integer<std::int64_t>("failed_unix_ms"));
  return out;
}

expected<placement_claim> decode_claim(const std::string& key, std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::invalid_argument, "placement claim at " + key + ": not a JSON object");
  reader r("placement claim", key, j);
  placement_claim out;
  WARM_TRY_SET(out.instance, r.text("instance"));
  if (auto ok = check_instance_name(out.instance); !ok)
    return r.bad("instance", "a valid instance name");
  WARM_TRY_SET(out.by, r.text("by"));
  if (auto ok = check_instance_name(out.by); !ok) return r.bad("by", "a valid instance name");
  WARM_TRY_SET(out.bytes, r.integer<std::uint64_t>("bytes"));
  WARM_TRY_SET(out.claimed_unix_ms, r.integer<std::int64_t>("claimed_unix_ms"));
  return out;
}

#undef WARM_TRY_SET

}  // namespace warm::cluster
