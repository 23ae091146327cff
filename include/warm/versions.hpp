// Served models: a model name whose versions come from a directory and are managed by warm, the
// way TensorFlow Serving's manager stack serves a model_base_path. Plain data, no CAF.
//
// A served model `m` with base path `m` (beneath a repository root) has its versions in the
// numeric directories `m/<version>/`. Its version policy picks which of the versions present are
// aspired; its load policy says in which order a new aspired version replaces an old one. Each
// version is a model of its own in warm's registry, named `m@<version>`, cached and evicted like
// any model; `m` is an alias (a vmodel) for its default version, and each label `m@<label>` an
// alias for the version it names. The rules are in docs/versions.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/batching.hpp"
#include "warm/error.hpp"

namespace warm {

// Which of the versions present are aspired (TensorFlow Serving's ServableVersionPolicy).
struct version_policy {
  enum class kind { latest, all, specific };
  kind which = kind::latest;
  std::uint64_t latest = 1;             // latest: the N highest versions
  std::vector<std::uint64_t> specific;  // specific: these versions, ascending, no duplicates
  bool operator==(const version_policy& o) const {
    return which == o.which && latest == o.latest && specific == o.specific;
  }
};

// "latest" (= latest:1), "latest:N" (N in 1..1000), "all", "specific:1,3" (positive versions, at
// least one). invalid_argument naming what is wrong for anything else.
expected<version_policy> parse_version_policy(std::string_view text);
// The text parse_version_policy reads back: "latest:1", "all", "specific:1,3".
std::string to_string(const version_policy& policy);

// The versions of `present` (any order, no duplicates) that `policy` aspires to, ascending. A
// specific version that is not present is not aspired (it becomes so when it appears).
std::vector<std::uint64_t> select_versions(const version_policy& policy,
                                           std::vector<std::uint64_t> present);

// How a new aspired version replaces an old one (TensorFlow Serving's AspiredVersionPolicy).
//  - availability_preserving: the new version is loaded first; an old one is unloaded once an
//    aspired version is ready. Requests never find the model unavailable; both may take memory.
//  - resource_preserving: old versions are unloaded first and the new one loaded after; between
//    the two, requests that name the model without a version find none (not_found).
enum class load_policy { availability_preserving, resource_preserving };
// "availability-preserving" or "resource-preserving"; invalid_argument otherwise.
expected<load_policy> parse_load_policy(std::string_view text);
std::string_view to_string(load_policy policy) noexcept;

// One served model, as the model configuration file or --serve-repo gives it.
struct served_model_config {
  std::string name;  // the model's name: an id without '@'
  // Its directory, relative to a repository root (local or S3), or an S3 URL of it
  // ("s3://bucket/models/mnist"); default: the name.
  std::string base_path;
  version_policy versions;
  load_policy loading = load_policy::availability_preserving;
  // Labels and the versions they name ("stable" → 3). A label's version is aspired whatever the
  // version policy says, for as long as the label names it.
  std::map<std::string, std::uint64_t> labels;
  // A label moves to its version only once that version is ready, unless forced: then as soon as
  // the version is being loaded (requests naming the label wait for that load, or get its error).
  bool force_labels = false;
  std::optional<std::uint64_t> size_hint;    // per version, as model_info::size_hint
  std::optional<batching_options> batching;  // per version, as model_info::batching
  bool operator==(const served_model_config& o) const {
    return name == o.name && base_path == o.base_path && versions == o.versions &&
           loading == o.loading && labels == o.labels && force_labels == o.force_labels &&
           size_hint == o.size_hint && batching == o.batching;
  }
};

// The whole set of served models: applied as one (version_manager::apply).
struct served_models_config {
  std::vector<served_model_config> models;
};

// Checks a configuration as a whole: names are ids without '@' and distinct, base paths relative
// or s3:// URLs, without ".." (an HTTP(S) URL cannot be listed and is refused), label names are
// ids without '@' that are not version numbers and name positive versions. invalid_argument
// naming the first problem; nothing is applied from a refused one.
expected<void> check_served_models(const served_models_config& config);

// The id of a served model's version or label: "m@3", "m@stable".
std::string version_id(const std::string& model, std::uint64_t version);
std::string label_id(const std::string& model, const std::string& label);

// A version's state in the manager (TensorFlow Serving's LoaderHarness states, less quiescing).
// new: known, not yet loaded by the manager; loading: its first load runs; ready: loaded once and
// serving (warm's cache may evict it since; a request loads it again); unloading: being
// unregistered; error: its load failed, retried after a back-off.
enum class version_state { new_, loading, ready, unloading, error };
// "NEW", "LOADING", "READY", "UNLOADING", "ERROR".
std::string_view to_string(version_state state) noexcept;

struct version_status {
  std::uint64_t version = 0;
  version_state state = version_state::new_;
  bool aspired = false;
  std::string error;            // error: why its last load failed
  double retry_in_seconds = 0;  // error: until its next load
  std::uint32_t failures = 0;   // failed loads since it was last ready
};

struct served_model_status {
  served_model_config config;
  std::vector<version_status> versions;          // ascending
  std::optional<std::uint64_t> default_version;  // what the model's name serves now
  std::map<std::string, std::uint64_t> labels;   // labels in effect (each names a ready version)
  std::string
      source_error;      // why its directory could not be read at the last look; empty if it could
  bool rolling = false;  // a version is being loaded or unloaded
};

}  // namespace warm
