// The values warm's runtime API speaks: model and vmodel descriptions and statuses, tensors,
// inference requests and results, and the inspection snapshot. Plain data, no CAF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/batching.hpp"
#include "warm/error.hpp"
#include "warm/model_io.hpp"
#include "warm/safetensors.hpp"

namespace warm {

// A model's state, in ModelMesh's vocabulary plus the internal queued/unloading.
enum class model_state { not_found, not_loaded, queued, loading, loaded, loading_failed };
// "NOT_FOUND", "NOT_LOADED", "QUEUED", "LOADING", "LOADED", "LOADING_FAILED".
std::string_view to_string(model_state state) noexcept;

// What a registration says about a model.
struct model_info {
  model_info() = default;
  model_info(std::string p, std::optional<std::uint64_t> v = {},
             std::optional<std::uint64_t> hint = {})
      : path(std::move(p)), version(v), size_hint(hint) {}

  std::string path;                      // relative to a repository root: "mnist", "mnist/3"
  std::optional<std::uint64_t> version;  // a version directory; default: the highest
  std::optional<std::uint64_t>
      size_hint;  // bytes to reserve on a device (≥ the weights); default: the weights
  // How this model's inferences are batched, replacing the runtime's options (runtime_options::
  // batching) as a whole; default: the runtime's.
  std::optional<batching_options> batching;
  bool operator==(const model_info& o) const {
    return path == o.path && version == o.version && size_hint == o.size_hint &&
           batching == o.batching;
  }
};

// Mean and variance of successful load times (Welford).
struct load_time_stats {
  std::uint64_t count = 0;
  double mean_ms = 0;
  double variance_ms2 = 0;
};

struct model_status {
  std::string id;
  model_state state = model_state::not_found;
  std::string device;              // where it is loaded or loading; empty otherwise
  std::uint64_t bytes = 0;         // bytes it takes on a device
  std::uint64_t requests = 0;      // uses: inferences and ensureLoaded calls
  std::uint64_t hits = 0;          // uses served without waiting for a load
  double requests_per_second = 0;  // moving average (60 s time constant)
  std::uint32_t in_flight = 0;
  double idle_seconds = -1;  // since the last use; -1 if never used
  load_time_stats loads;
  std::optional<warm::error> last_error;  // the recorded load failure, while it blocks loads
  double retry_in_seconds = 0;            // loading_failed: until the next attempt is allowed
  std::uint64_t loaded_bytes = 0;         // LOADING: copied so far (progress); LOADED: bytes
  // The backend that serves it ("dense", "torchscript") and its inputs and outputs, read from its
  // file at registration; empty when the file could not be read (then a use fails to load).
  std::string kind;
  model_io io;
  // For a model with one input and one output, both [batch, width]: the two widths (0 otherwise).
  std::uint64_t input_width = 0;
  std::uint64_t output_width = 0;
  std::optional<batching_options> batching;  // its registration's own; none: the runtime's
  // The version directory it is served from: the registered one, else the one its registration
  // chose (the highest present); none for a file named directly or an id not registered.
  std::optional<std::uint64_t> version;
  // Where its file's bytes are, beyond a device (state, device): for a model from a remote source
  // (S3, HTTP), the object's URL, and whether the local disk tier holds a copy of it now, of how
  // many bytes (else the bytes are at the source only: its next load fetches them). Empty, false
  // and 0 for a model on this machine's disk, and for one whose file was never resolved.
  std::string source;
  bool in_tier = false;
  std::uint64_t tier_bytes = 0;
};

// What a model takes and gives (KServe V2's model metadata), read from its file's header.
struct model_metadata {
  std::string id;  // the model (for a vmodel: its active model)
  std::optional<std::uint64_t>
      version;                    // the version served: the registered one, else the version
                                  // directory registration chose; none for a file named directly
  std::uint64_t bytes = 0;        // bytes it takes on a device
  std::string kind;               // its backend: "dense", "torchscript"
  model_io io;                    // its inputs and outputs
  std::uint64_t input_width = 0;  // one [batch, width] input and output: the widths, else 0
  std::uint64_t output_width = 0;
  std::uint32_t layers = 0;  // dense models: layers and activation; 0 and empty otherwise
  std::string activation;
};

enum class vmodel_state { not_found, defined, transitioning, transition_failed };
// "NOT_FOUND", "DEFINED", "TRANSITIONING", "TRANSITION_FAILED".
std::string_view to_string(vmodel_state state) noexcept;

struct vmodel_status {
  std::string id;
  vmodel_state state = vmodel_state::not_found;
  std::string active;  // the model serving requests
  std::string target;  // the model it moves to (equal to active when settled)
  model_state active_state = model_state::not_found;
  model_state target_state = model_state::not_found;
  std::optional<warm::error> error;  // why the last transition failed
};

struct infer_request {
  std::string target;          // a model id or a vmodel id
  std::vector<tensor> inputs;  // the model's inputs by name, any order (model_status::io)
  // Sent by another instance of a cluster: served here, never passed on again (one hop).
  bool forwarded = false;
};

struct infer_result {
  std::vector<tensor> outputs;  // the model's outputs, in its order
  std::string model;            // the model that served it
  bool cache_hit = false;       // served without waiting for a load
  double load_wait_ms = 0;      // time spent waiting for the model to load
};

// Inspection: one snapshot of every actor's state.
struct resident_info {
  std::string model;
  std::uint64_t bytes = 0;
  std::uint32_t in_flight = 0;
  std::uint64_t uses = 0;
  double idle_seconds = 0;
  double score = 0;  // the policy's score, what the eviction order is by (docs/policies.md)
  std::uint64_t predicted = 0;  // bytes reserved before it loaded
  std::uint64_t measured = 0;   // what its load measured; 0 when its backend's charge is exact
};
struct device_info {
  std::string name;
  std::string policy;
  std::uint64_t capacity = 0;
  std::uint64_t used = 0;      // bytes charged now (resident, reserved and draining)
  std::uint64_t draining = 0;  // bytes of evicted models still finishing inferences
  std::uint64_t evictions = 0;
  std::uint64_t score_swaps = 0;        // importance heaps swapped in (policies that rescore)
  std::vector<resident_info> resident;  // in eviction order: the policy's next victim first
  std::string
      state;  // device::state(): a model runtime's pid, restarts, readiness; empty otherwise
  // Models resident on the device that the policy does not rank, plus models it ranks that are
  // not resident: 0 unless the device's and the policy's books disagree (a bug; tests check it).
  std::uint64_t untracked = 0;
};
struct queued_load {
  std::string model;
  bool waiting = false;  // a request waits on it (else proactive)
  double age_ms = 0;     // waiting: since the first waiting request; proactive: since last use
  std::uint32_t attempts = 0;
  std::uint32_t waiters = 0;  // requests waiting on it now (0 for a proactive load)
};
struct running_load {
  std::string model;
  std::string device;
  std::string phase;  // "reserving", "loading" or "settling"
  std::uint32_t attempt = 0;
  std::uint32_t waiters = 0;  // requests waiting on it now
  double elapsed_ms = 0;      // since it left the queue
  std::uint64_t bytes = 0;    // what it is expected to take on its device
};
struct failure_info {
  std::string model;
  std::string device;
  warm::error error;
  double age_seconds = 0;
  double expires_in_seconds = 0;
};
// A file the local disk tier holds (tier_info::held).
struct tier_held {
  std::string source;               // the object's URL it is a copy of
  std::uint64_t bytes = 0;          // its size
  std::vector<std::string> models;  // the registered models whose file it is, sorted
};
// The local disk tier of remote model files (docs/storage.md): its budget and contents, and what
// it has done since the runtime started. All zero and empty while no tier is open (no remote
// source configured or met yet).
struct tier_info {
  bool open = false;            // a tier directory is open
  std::string dir;              // its directory
  std::uint64_t capacity = 0;   // its byte budget
  std::uint64_t used = 0;       // bytes of complete files
  std::uint64_t reserved = 0;   // bytes reserved for fetches in flight
  std::uint64_t files = 0;      // complete files
  std::uint64_t hits = 0;       // copies asked for that it held
  std::uint64_t misses = 0;     // copies it had to fetch
  std::uint64_t evictions = 0;  // files evicted to make room
  std::uint64_t fetches = 0;    // fetches that ended with the file committed
  std::uint64_t fetch_failures = 0;
  std::uint64_t fetch_bytes = 0;  // bytes received by fetches
  double fetch_seconds = 0;       // the successful fetches' durations together
  std::vector<tier_held> held;    // its files, first to be evicted first
};
struct inspection {
  std::vector<device_info> devices;
  std::vector<queued_load> queue;  // in start order
  std::vector<running_load> running;
  std::vector<failure_info> failures;
  std::vector<model_status> models;  // models with runtime state (used at least once)
  std::uint64_t registered_models = 0;
  std::uint64_t vmodels = 0;
  std::uint32_t max_concurrent_loads = 0;
  std::uint64_t loads_started = 0;
  std::uint64_t loads_failed = 0;
  std::uint64_t importance_rebuilds = 0;  // heaps built by the importance scorer
  double importance_rebuild_seconds = 0;  // how long the last one took
  tier_info tier;                         // the disk tier of remote model files
};

// An instance's view of its cluster (docs/cluster.md): what Warm.clusterInfo and
// `warmctl inspect cluster` show.
struct cluster_instance {
  std::string name;
  std::string address;
  std::string version;
  bool self = false;
  bool draining = false;
  std::uint64_t capacity = 0;  // bytes, all devices
  std::uint64_t used = 0;
  std::uint64_t models_loaded = 0;
  std::uint32_t loads_in_flight = 0;
  std::uint32_t loading_threads = 0;
  std::int64_t started_unix = 0;
  double updated_seconds_ago = 0;      // since this instance saw its record last written
  std::vector<std::string> residents;  // models resident there, sorted
  std::vector<std::string> loading;    // models queued or loading there, sorted
  std::vector<std::string> tiered;     // models whose files its disk tier holds, sorted
};
struct cluster_info {
  bool enabled = false;  // false: running alone
  std::string name;
  std::string instance;
  bool joined = false;
  std::string last_error;
  std::vector<std::string> endpoints;
  std::vector<cluster_instance> instances;  // by name
  // What this instance did for the cluster since it started.
  std::uint64_t forwarded = 0;    // misses answered by the peer holding the model
  std::uint64_t fell_back = 0;    // forwards the peer could not serve, served here instead
  std::uint64_t placed = 0;       // cold models it placed (claims it won)
  std::uint64_t claims_lost = 0;  // placements another instance claimed first (then followed)
};

// A model's state changed (TensorFlow Serving's state monitor): what watchers receive.
struct model_event {
  std::string model;
  model_state previous = model_state::not_loaded;
  model_state state = model_state::not_loaded;
  std::string device;                // where it is loaded or loading, or the device it left
  std::optional<warm::error> error;  // LOADING_FAILED: why
  // LOADED to NOT_LOADED: why it left its device, when known: "capacity" (evicted for room),
  // "unload" (an operator), "replaced" (by a newer registration's copy), "lost" (with its model
  // runtime's process); empty otherwise.
  std::string reason;
  std::uint64_t sequence = 0;  // increases by one per event of this runtime
};

// Completion callbacks: called exactly once, on an arbitrary warm thread; they must not block.
template <class T>
using callback = std::function<void(expected<T>)>;

}  // namespace warm
