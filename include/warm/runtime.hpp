// warm::runtime — the embedding API. A host process links libwarm (pkg-config: warm) and gets the
// whole model cache in-process: registration, on-demand loading with one load per cold start,
// prioritized loads, eviction, failure records, vmodels and inference.
//
//   auto rt = warm::runtime::create({.repositories = {"models"}, .state_dir = "state"});
//   (*rt)->register_model("mnist", {"mnist"}).get();
//   auto out = (*rt)->infer({"mnist", {input}}).get();
//
// Every method has two forms: one takes a callback (called exactly once, on a warm thread; it
// must not block), the other returns a std::future. Errors are values (warm::expected).
// All methods are thread-safe. Destroying the runtime waits for inferences it is running; the
// caller must not call it concurrently with its destruction.
//
// A hit (the model is loaded) takes a lease without sending a message. An inference no larger
// than runtime_options::inline_inference_limit then runs on the calling thread (by default, every
// hit); a larger one runs on warm's inference threads and is answered from there, so a caller
// serving many clients on one thread (warmd's RPC loop) is not held up by one heavy batch. A miss
// is answered once the model is loaded, from warm's inference threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warm/batching.hpp"
#include "warm/clock.hpp"
#include "warm/device.hpp"
#include "warm/error.hpp"
#include "warm/metrics.hpp"
#include "warm/model_loader.hpp"
#include "warm/policy_options.hpp"
#include "warm/runtime_types.hpp"
#include "warm/versions.hpp"

namespace warm {

class registry_storage;  // storage/registry_storage.hpp

// Models from remote sources (docs/storage.md): a repository root or a registration's path may be
// "s3://BUCKET/PREFIX" or "http(s)://HOST/PATH". Their files are fetched into a disk tier, a
// directory kept under a byte budget, and loaded from there.
struct source_options {
  std::string s3_endpoint;          // "http(s)://HOST[:PORT]" of an S3-compatible store; empty: AWS
  std::string s3_region;            // empty: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1
  std::string ca_file;              // extra CA certificates for https sources; empty: the system's
  std::uint32_t fetch_streams = 8;  // ranged GETs of one fetch in flight at once, 1..64
  std::uint64_t fetch_part_bytes = 8 << 20;  // bytes per ranged GET
  std::uint32_t fetch_threads = 4;           // fetches of different files at once
  std::string cache_dir;                     // the disk tier's directory; empty: <state_dir>/tier
  std::uint64_t cache_bytes = 0;             // its budget; 0: twice the devices' capacity together
  // A dense model's load follows its fetch (copies each byte as soon as the bytes before it are
  // in); false: it waits until the whole file is in the tier.
  bool follow_fetch = true;
};

struct runtime_options {
  std::vector<std::string> devices{"host:1GiB"};  // device specs, see parse_device_spec
  // Model repository roots (at least one): directories, or remote roots (source_options).
  std::vector<std::string> repositories;
  source_options sources;
  std::string state_dir = "warm-state";  // holds registry.db
  std::string policy = "kdf";            // eviction policy of every device (docs/policies.md)
  std::vector<std::string>
      device_policies;  // per device, in `devices` order; "" or missing = `policy`
  // Devices the host process made itself, placed after `devices` (warmd's model runtimes, each a
  // device whose models another process holds), each with its policy ("" = `policy`).
  struct attached_device {
    std::shared_ptr<device> dev;
    std::string policy;
  };
  std::vector<attached_device> attached_devices;
  policy_options policy_tuning;  // the policies' parameters (capacity is set per device)
  std::chrono::milliseconds rescore_period{1000};  // how often the importance scorer rebuilds heaps
  std::uint32_t max_concurrent_loads = 2;          // loads (reservations included) at once, 1..64
  std::uint32_t max_load_attempts = 3;             // attempts per load across devices, 1..16
  std::chrono::nanoseconds failure_expiry =
      std::chrono::minutes(10);          // how long a failure blocks a device
  std::uint64_t max_models = 1'000'000;  // models and vmodels the registry holds, together
  std::uint32_t scheduler_threads = 0;   // CAF scheduler threads; 0 = one per core
  std::uint32_t inference_threads =
      0;  // threads running misses and offloaded hits; 0 = one per core
  // The largest hit, in multiply-adds (resident_model::cost: about batch x the model's parameters),
  // run on the calling thread; a larger hit keeps its lease and runs on the inference threads, its
  // callback called from there. The default runs every hit inline: an embedder calling from its own
  // threads already has the parallelism it chose and pays no thread hop. warmd sets a small limit.
  std::uint64_t inline_inference_limit = UINT64_MAX;
  // Dynamic batching of the models' inferences (warm/batching.hpp): the options of every model
  // registered without its own (model_info::batching); off by default. For a model that batches,
  // a hit is queued for its model's next pass on the inference threads instead of running inline.
  batching_options batching;
  // Automatic batching, while `batching` is off, of every model with a batch dimension that runs
  // in this process and whose registration sets no batching of its own: the inferences that go to
  // the inference threads anyway (the waiters of a cold load, a backlog of hits over
  // inline_inference_limit) share passes of up to this many rows, with no delay (what is queued
  // runs as soon as a thread is free). Hits run on the caller's thread are never queued. 0 or 1:
  // off. At most 65536.
  std::uint64_t auto_batch = 32;
  std::uint32_t blas_threads =
      1;  // host threads per inference (BLAS, libtorch; process-wide), 0 = leave as is
  std::shared_ptr<const clock> time;     // default: the steady clock
  std::shared_ptr<model_loader> loader;  // default: file_loader
  // Makes each device from its spec; default make_device. Fault injection substitutes its own
  // (warm/fault_injection.hpp).
  std::function<expected<std::unique_ptr<device>>(const device_spec&)> make_device;
  // Served models (serve(), warm/versions.hpp): how often each one's directory is looked at, and
  // how long a version's model file must stay unchanged before the version is taken.
  std::chrono::nanoseconds version_poll = std::chrono::seconds(1);
  std::chrono::nanoseconds version_settle = std::chrono::seconds(1);
  // Where the registry is kept instead of SQLite under `state_dir`: called once by create(). A
  // store shared with other runtimes (warmd's cluster mode keeps it in etcd) brings their
  // registrations and vmodels into this one as they change.
  std::function<expected<std::unique_ptr<registry_storage>>()> registry_store;
  // Offered each inference whose target is not resident here (a miss), unless the request was
  // forwarded to this runtime, before it is loaded here: returns true to take the request over
  // (it then answers `done`; warmd's cluster mode forwards it to an instance that holds the
  // model), false to load and serve it here. `model` is the target resolved (a vmodel's active
  // model). Runs on the caller's thread and must not block. Hits never reach it.
  std::function<bool(const std::string& model, infer_request& request,
                     callback<infer_result>& done)>
      miss_handler;
};

struct runtime_impl;

class runtime {
 public:
  // Validates the options, opens the registry (loading every stored model and vmodel), creates
  // the devices and starts the actors. invalid_argument for bad options, unavailable for a device
  // that cannot be used, the store's error for a state directory it cannot use.
  static expected<std::unique_ptr<runtime>> create(runtime_options options);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Registers `id` (idempotent for the same info; invalid_argument for different info). The path
  // must resolve inside a repository root. load_now queues a background load; sync answers only
  // once the model is loaded (or its load failed). Answered once the registration is durable.
  void register_model(const std::string& id, model_info info, bool load_now, bool sync,
                      callback<void> done);
  std::future<expected<void>> register_model(const std::string& id, model_info info,
                                             bool load_now = false, bool sync = false);

  // Unregisters (unloading asynchronously). invalid_argument while a vmodel references it.
  void unregister_model(const std::string& id, callback<void> done);
  std::future<expected<void>> unregister_model(const std::string& id);

  // The model's status; state NOT_FOUND for an unknown id (not an error).
  void status(const std::string& id, callback<model_status> done);
  std::future<expected<model_status>> status(const std::string& id);

  // Registered models in id order, starting after `after`, at most `limit` (0 = all).
  void list_models(const std::string& after, std::uint32_t limit,
                   callback<std::vector<model_status>> done);
  std::future<expected<std::vector<model_status>>> list_models(const std::string& after = "",
                                                               std::uint32_t limit = 0);

  // Unloads the model (or a vmodel's active model) and keeps it registered: a loaded copy stops
  // taking new requests (those in flight finish), a queued background load is cancelled.
  // unavailable while a load that requests wait for runs; not_found for an unknown id.
  void unload(const std::string& id, callback<void> done);
  std::future<expected<void>> unload(const std::string& id);

  // Forgets the model's (or a vmodel's active model's) load failures: instead of failing fast
  // until a failure record expires, its next use loads it again (after its file was fixed, say).
  // not_found for an unknown id.
  void retry(const std::string& id, callback<void> done);
  std::future<expected<void>> retry(const std::string& id);

  // What the model (or a vmodel's active model) takes and gives, from its file's header; no load.
  void describe(const std::string& id, callback<model_metadata> done);
  std::future<expected<model_metadata>> describe(const std::string& id);

  // Loads the model (or a vmodel's active model) if needed; counts as a use. sync waits for it.
  void ensure_loaded(const std::string& id, bool sync, callback<void> done);
  std::future<expected<void>> ensure_loaded(const std::string& id, bool sync = false);

  // Points vmodel `id` at `target`. The active model keeps serving until the target is loaded,
  // then the alias flips. expected_target makes it a compare-and-set on the current target.
  void set_vmodel(const std::string& id, const std::string& target, bool auto_delete_target,
                  std::optional<std::string> expected_target, callback<warm::vmodel_status> done);
  std::future<expected<warm::vmodel_status>> set_vmodel(
      const std::string& id, const std::string& target, bool auto_delete_target = false,
      std::optional<std::string> expected_target = {});
  void delete_vmodel(const std::string& id, callback<void> done);
  std::future<expected<void>> delete_vmodel(const std::string& id);
  void vmodel_status(const std::string& id, callback<warm::vmodel_status> done);
  std::future<expected<warm::vmodel_status>> vmodel_status(const std::string& id);

  // Served models: names whose versions come from their directories, each version a model `m@N`,
  // the name an alias for the default version and `m@label` for a label's (docs/versions.md).
  // serve() replaces the served models with `config` as a whole: a refused configuration
  // (invalid_argument naming the problem) changes nothing; answered once taken in, while versions
  // load afterwards. Models no longer listed have their versions and aliases removed.
  void serve(served_models_config config, callback<void> done);
  std::future<expected<void>> serve(served_models_config config);
  // Every served model's versions, default, labels and source state, by name.
  void served(callback<std::vector<served_model_status>> done);
  std::future<expected<std::vector<served_model_status>>> served();

  // Runs the model (or vmodel) named by request.target, loading it first if needed.
  void infer(infer_request request, callback<infer_result> done);
  std::future<expected<infer_result>> infer(infer_request request);

  // Calls `listener` on every model state change from now on (in order, on a warm thread; it must
  // not block), until unwatch(id). Returns the id.
  std::uint64_t watch(std::function<void(const model_event&)> listener);
  void unwatch(std::uint64_t id);

  // A snapshot of every actor's state: the registry's counts, the loader pool's queue, running
  // loads and failure records, each device's residents in eviction order, the scorer's rebuilds
  // and every model with runtime state. Each actor's part is taken whole inside one of its
  // message handlers, so it is consistent in itself; the parts are asked for at once and taken
  // concurrently, not at one instant (a load may show as running in the pool and not yet
  // resident on its device). Nothing is stopped to take it.
  void inspect(callback<inspection> done);
  std::future<expected<inspection>> inspect();

  // The devices, in option order.
  const std::vector<std::shared_ptr<device>>& devices() const;

  // The live instruments (warm/metrics.hpp; prometheus_text renders them).
  const runtime_metrics& metrics() const;

  runtime_impl& impl() { return *impl_; }

 private:
  explicit runtime(std::unique_ptr<runtime_impl> impl);
  std::unique_ptr<runtime_impl> impl_;
};

}  // namespace warm
