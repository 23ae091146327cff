// What a cluster keeps in etcd, and how: the key layout under one cluster's root and the JSON of
// each record. Pure logic (no etcd, no threads): the membership writes and reads these, tests and
// tools decode them.
//
// Keys, under root = "/warm/<cluster name>/":
//   instances/<instance name>   an instance_record, on the instance's lease: it disappears when
//                               the instance stops or its lease expires
//   placement/claims/<model id> a placement_claim: the instance that loads a model no instance
//                               held, on the lease of the instance that placed it
//   placement/instances/<name>  the model last placed on that instance: written with every claim
//                               and compared by the next one, so that two placements made from the
//                               same view cannot both choose the instance
//                               (cluster/miss_placement.hpp)
//   placement/copies/<model id> a copies_change: the last change of the model's copies (added or
//                               dropped), on the lease of the instance that made it
//   placement/failures/<model id>/<name>
//                               a placement_failure: the model's load failed on that instance, on
//                               that instance's lease; placement passes it over for a while
//
// Records are JSON objects. Decoding checks every field's type and range and names the key and
// field of the first problem; unknown fields are ignored (a newer instance may add some).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ranking/ranking.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::cluster {

// The root of a cluster's keys. invalid_argument unless `cluster` is 1 to 64 characters of
// [A-Za-z0-9._-].
expected<std::string> cluster_root(std::string_view cluster);
// A valid instance name: 1 to 128 characters of [A-Za-z0-9._:-]. invalid_argument naming it.
expected<void> check_instance_name(std::string_view name);

std::string instances_prefix(const std::string& root);
std::string instance_key(const std::string& root, const std::string& name);

// One device of an instance, as placement needs it.
struct device_record {
  std::string name;
  std::string policy;
  std::uint64_t capacity = 0;
  std::uint64_t used = 0;
  std::uint32_t models = 0;
  double idle_seconds = 0;  // since its least recently used model was used (0: none resident)
  // Its first residents in eviction order with their values (kdf only; see
  // ranking::eviction_candidates).
  std::vector<ranking::eviction_candidate> candidates;
};

// The most model ids an instance record lists as tiered. A record read from etcd with more, or
// with an entry that is not a model id (1 to 256 bytes of printable ASCII, no space or '/'), is
// refused as invalid.
inline constexpr std::size_t max_tiered_models = 1024;

// What an instance publishes about itself.
struct instance_record {
  std::string name;
  std::string address;                // where peers reach its Cap'n Proto service
  std::string version;                // warm's version
  std::int64_t started_unix = 0;      // seconds since the epoch
  std::int64_t updated_unix = 0;      // when this record was written
  bool draining = false;              // stopping: takes no new loads
  std::uint32_t loading_threads = 0;  // loads it runs at once
  std::uint32_t loads_in_flight = 0;  // loads queued or running
  std::uint64_t models_loaded = 0;    // resident models, all devices
  double requests_per_second = 0;     // its models' request rates together (60 s moving averages);
                                      // drifts: not a change of state. Absent in a record: 0
  std::vector<device_record> devices;
  // The models resident on it (all devices), sorted, each once: where a request for one of them
  // can be forwarded. Absent in a record: none.
  std::vector<std::string> residents;
  // The models queued or loading on it, sorted, each once. Absent in a record: none.
  std::vector<std::string> loading;
  // Its hot models: used within the last minute or in use, at most 32 (the most valuable, as
  // recent_models orders them), sorted, each once. When the instance dies, the others load them
  // before their next request. Absent in a record: none.
  std::vector<std::string> hot;
  // The models whose files its disk tier holds (remote models it would load from local disk,
  // without fetching), sorted, each once, at most max_tiered_models (the first by id). Absent in a
  // record: none.
  std::vector<std::string> tiered;

  // Whether `model` is among residents; among loading; among tiered.
  bool holds(const std::string& model) const;
  bool is_loading(const std::string& model) const;
  bool tier_holds(const std::string& model) const;

  // Equal but for updated_unix: whether publishing this record again would tell anyone anything.
  bool same_state(const instance_record& other) const;
};

std::string encode(const instance_record& r);
// invalid_argument "instance record at KEY: FIELD ..." for anything but a valid record.
expected<instance_record> decode_instance(const std::string& key, std::string_view json);

// The record of this instance now, from its runtime's inspection: devices with their eviction
// candidates (the first `candidates` residents of a kdf device), loads queued and running, the
// models whose files its disk tier holds (inspection::tier, at most max_tiered_models).
instance_record record_from(const inspection& state, std::string name, std::string address,
                            std::string version, std::int64_t started_unix, bool draining,
                            std::size_t candidates = 16);

// A resident model worth keeping in the cluster: recent_models' answer.
struct recent_model {
  std::string model;
  std::uint64_t bytes = 0;
};
// The models resident in `state` used within the last `idle_limit_seconds` or in use now, each
// once, most valuable first (the policy's value where it publishes one, ranking::scores_are_values;
// then the most recently used), at most `limit` (0: all).
std::vector<recent_model> recent_models(const inspection& state, double idle_limit_seconds,
                                        std::size_t limit = 0);

// An instance holding a model, as a forward needs it (membership::holders).
struct holder {
  std::string name;
  std::string address;
  std::uint32_t loads_in_flight = 0;
  bool draining = false;
  bool self = false;
};

// Placement's view of an instance: its device with the most room, and the instance's loads.
ranking::instance_view view_of(const instance_record& r);

// An instance as another sees it: its record and the record's revision in etcd.
struct member {
  instance_record record;
  std::int64_t mod_revision = 0;  // of its record in etcd
  double seen_seconds_ago = 0;    // since the viewer saw its record last written
  bool self = false;              // the viewer itself
};

std::string placement_prefix(const std::string& root);  // both kinds of key below
std::string claims_prefix(const std::string& root);
std::string claim_key(const std::string& root, const std::string& model);
std::string placed_prefix(const std::string& root);
std::string placed_key(const std::string& root, const std::string& instance);

// Which instance loads a model that no instance held when a request for it arrived
// (cluster/miss_placement.hpp).
struct placement_claim {
  std::string instance;              // where the model is loaded
  std::string by;                    // the instance that placed it
  std::uint64_t bytes = 0;           // the model's bytes, reserved on `instance`
  std::int64_t claimed_unix_ms = 0;  // when it was placed (milliseconds since the epoch)
};

std::string encode(const placement_claim& c);
// A placement key's value: {"model": the model last placed on the instance}.
std::string encode_placed(const std::string& model);

// The last change of a model's copies (cluster/copy_rule.hpp): compared and written by the holder
// that adds or drops copies, so that holders deciding at once make one change, and none within the
// settle time of the last.
std::string copies_prefix(const std::string& root);
std::string copies_key(const std::string& root, const std::string& model);
struct copies_change {
  std::uint32_t copies = 0;  // the copies it aimed at
  std::string by;            // the instance that made it
  std::int64_t changed_unix_ms = 0;
};
std::string encode(const copies_change& c);
// invalid_argument "copies change at KEY: FIELD ..." for anything but a valid record.
expected<copies_change> decode_copies(const std::string& key, std::string_view json);

std::string failures_prefix(const std::string& root);
std::string failure_key(const std::string& root, const std::string& model,
                        const std::string& instance);

// A load of a model that failed on an instance (the instance is in the key).
struct placement_failure {
  std::string error;                // "code: message"
  std::int64_t failed_unix_ms = 0;  // when
};
std::string encode(const placement_failure& f);
// invalid_argument "placement failure at KEY: FIELD ..." for anything but a valid record.
expected<placement_failure> decode_failure(const std::string& key, std::string_view json);
// invalid_argument "placement claim at KEY: FIELD ..." for anything but a valid claim.
expected<placement_claim> decode_claim(const std::string& key, std::string_view json);

}  // namespace warm::cluster
