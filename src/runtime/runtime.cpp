#include "warm/runtime.hpp"

#include "runtime/runtime_impl.hpp"

#include <caf/all.hpp>

#include <cstring>
#include <optional>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/loader_pool.hpp"
#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/scorer_protocol.hpp"
#include "actors/protocol/version_manager_protocol.hpp"
#include "actors/protocol/watch_hub_protocol.hpp"
#include "actors/registry_actor.hpp"
#include "actors/scorer_actor.hpp"
#include "actors/version_manager.hpp"
#include "actors/watch_hub.hpp"
#include "common/actor_threads.hpp"
#include "runtime/batcher.hpp"
#include "runtime/checked_outputs.hpp"
#include "runtime/executor.hpp"
#include "runtime/runtime_actors.hpp"
#include "runtime/runtime_sources.hpp"
#include "sources/object_url.hpp"
#include "sources/remote_versions.hpp"
#include "storage/registry_store.hpp"
#include "warm/backend.hpp"
#include "warm/model_repository.hpp"

namespace warm {

using runtime_detail::promised;

namespace {

// Marks every thread the actor system starts as one that runs actors (common/actor_threads.hpp).
class actor_thread_marker final : public caf::thread_hook {
 public:
  void init(caf::actor_system&) override {}
  void thread_started() override { actor_threads::enter(); }
  void thread_terminates() override { actor_threads::leave(); }
};

// Runs the inference for a held lease on inputs check_inputs accepted (`batch` rows) and packages
// the result, its outputs checked against the model's declaration. The lease is released before
// returning, so the caller's callback never runs with the slot in use.
expected<infer_result> run_checked(serving_slot::lease lease, const std::string& model,
                                   const infer_request& request, std::uint64_t batch, bool hit,
                                   double wait_ms) {
  auto ran =
      checked_outputs(lease.model().run(request.inputs, batch), lease.model().io(), model, batch);
  lease.reset();  // from here on the model may be unloaded
  if (!ran) return std::move(ran).error();
  infer_result result;
  result.outputs = std::move(*ran);
  result.model = model;
  result.cache_hit = hit;
  result.load_wait_ms = wait_ms;
  return result;
}

// The request's inputs checked against the leased model (and put in its order).
expected<std::uint64_t> check_leased(const serving_slot::lease& lease, infer_request& request) {
  const auto& m = lease.model();
  return check_inputs(request.inputs, m.io(), m.max_batch());
}

expected<void> check_options(const runtime_options& o) {
  if (o.devices.empty() && o.attached_devices.empty())
    return make_error(errc::invalid_argument, "at least one device is required");
  for (auto& a : o.attached_devices)
    if (!a.dev) return make_error(errc::invalid_argument, "an attached device is null");
  if (o.repositories.empty())
    return make_error(errc::invalid_argument, "at least one model repository is required");
  if (o.max_concurrent_loads < 1 || o.max_concurrent_loads > 64)
    return make_error(errc::invalid_argument, "max_concurrent_loads must be 1..64");
  if (o.max_load_attempts < 1 || o.max_load_attempts > 16)
    return make_error(errc::invalid_argument, "max_load_attempts must be 1..16");
  if (o.failure_expiry <= std::chrono::nanoseconds::zero())
    return make_error(errc::invalid_argument, "failure_expiry must be positive");
  if (o.max_models == 0) return make_error(errc::invalid_argument, "max_models must be positive");
  if (o.device_policies.size() > o.devices.size())
    return make_error(errc::invalid_argument, "more device policies than devices");
  if (o.rescore_period.count() <= 0)
    return make_error(errc::invalid_argument, "rescore_period must be positive");
  if (o.version_poll < std::chrono::milliseconds(1))
    return make_error(errc::invalid_argument, "version_poll must be at least 1 ms");
  if (o.version_settle.count() < 0)
    return make_error(errc::invalid_argument, "version_settle may not be negative");
  if (auto why = check_batching(o.batching); !why.empty())
    return make_error(errc::invalid_argument, "batching: " + why);
  if (o.auto_batch > max_batch_limit)
    return make_error(errc::invalid_argument,
                      "auto_batch is over " + std::to_string(max_batch_limit));
  return {};
}

}  // namespace

expected<std::unique_ptr<runtime>> runtime::create(runtime_options options) {
  if (auto ok = check_options(options); !ok) return std::move(ok).error();
  auto impl = std::make_unique<runtime_impl>();
  impl->time = options.time ? options.time : std::make_shared<steady_clock>();
  if (!options.loader) options.loader = std::make_shared<file_loader>();

  std::vector<std::unique_ptr<cache_policy>> policies;
  bool policies_rescore = false;
  // Adds a device with its policy ("" = options.policy).
  auto add = [&](std::shared_ptr<device> dev, const std::string& policy_name) -> expected<void> {
    for (auto& other : impl->devices)
      if (other->name() == dev->name())
        return make_error(errc::invalid_argument, "device '" + other->name() + "' is given twice");
    impl->devices.push_back(std::move(dev));
    auto tuning = options.policy_tuning;
    tuning.capacity = impl->devices.back()->capacity();
    tuning.rescore_period = std::chrono::seconds(0);  // the scorer actor rebuilds instead
    auto policy = make_policy(policy_name.empty() ? options.policy : policy_name, tuning);
    if (!policy) return std::move(policy).error();
    policies_rescore = policies_rescore || (*policy)->rescorer() != nullptr;
    policies.push_back(std::move(*policy));
    return {};
  };
  for (std::size_t index = 0; index < options.devices.size(); ++index) {
    auto spec = parse_device_spec(options.devices[index]);
    if (!spec) return std::move(spec).error();
    auto dev = options.make_device ? options.make_device(*spec) : make_device(*spec);
    if (!dev) return std::move(dev).error();
    auto added = add(std::move(*dev),
                     index < options.device_policies.size() ? options.device_policies[index] : "");
    if (!added) return std::move(added).error();
  }
  for (auto& a : options.attached_devices)
    if (auto added = add(a.dev, a.policy); !added) return std::move(added).error();
  std::vector<std::string> local_roots, remote_roots;
  for (const auto& root : options.repositories)
    (sources::is_remote(root) ? remote_roots : local_roots).push_back(root);
  auto repository = model_repository::create(local_roots);
  if (!repository) return std::move(repository).error();
  std::unique_ptr<registry_storage> store;
  if (options.registry_store) {
    auto made = options.registry_store();
    if (!made) return std::move(made).error();
    store = std::move(*made);
  } else {
    auto opened = registry_store::open(options.state_dir);
    if (!opened) return std::move(opened).error();
    store = std::make_unique<registry_store>(std::move(*opened));
  }
  auto stored = store->load();  // a registry that cannot be read must not start empty
  if (!stored) return std::move(stored).error();

  impl->config = std::make_unique<caf::actor_system_config>();
  if (options.scheduler_threads)
    impl->config->set("scheduler.max-threads", options.scheduler_threads);
  impl->config->add_thread_hook<actor_thread_marker>();
  impl->system = std::make_unique<caf::actor_system>(*impl->config);
  if (options.blas_threads) set_backend_threads(static_cast<int>(options.blas_threads));
  auto threads = options.inference_threads ? options.inference_threads
                                           : std::max(1u, std::thread::hardware_concurrency());
  impl->executor = std::make_unique<warm::executor>(threads);
  impl->reclaimer = std::make_unique<warm::executor>(1);
  impl->reclaim_to = std::make_shared<reclaim_gate>();
  impl->reclaim_to->open = impl->reclaimer.get();
  auto reclaim = [gate = impl->reclaim_to](std::function<void()> task) {
    std::unique_lock<std::mutex> lock(gate->mutex);
    if (gate->open) return gate->open->submit(std::move(task));
    lock.unlock();
    task();  // the runtime has stopped: no actor runs, freeing here stalls nothing
  };
  impl->describer =
      std::make_unique<warm::executor>(4);  // a slow describe (a helper at its deadline) holds one

  impl->metrics = std::make_shared<runtime_metrics>(impl->devices.size());
  std::uint64_t device_bytes = 0;
  for (const auto& dev : impl->devices)
    device_bytes += dev->capacity();
  auto remote =
      start_sources(*impl->system, options, remote_roots, device_bytes, *impl->time, impl->metrics);
  if (!remote) return std::move(remote).error();
  impl->tier = remote->tier;
  impl->fetcher = std::move(remote->fetcher);

  impl->batcher = std::make_unique<warm::batcher>(options.batching, options.auto_batch,
                                                  *impl->executor, *impl->metrics);
  loader_pool_config pool;
  pool.metrics = impl->metrics;
  pool.devices = impl->devices;
  pool.loader = options.loader;
  pool.time = impl->time;
  pool.max_concurrent_loads = options.max_concurrent_loads;
  pool.max_attempts = options.max_load_attempts;
  pool.failure_expiry = options.failure_expiry;
  pool.reclaim = reclaim;
  pool.materialize = remote->materialize;
  impl->pool = spawn_loader_pool(*impl->system, std::move(pool));
  for (std::size_t i = 0; i < impl->devices.size(); ++i)
    impl->device_actors.push_back(spawn_device_actor(
        *impl->system, {i, impl->devices[i], std::move(policies[i]), impl->time, impl->metrics},
        impl->pool));
  attach_devices(impl->pool, impl->device_actors);
  if (policies_rescore) {
    impl->scorer = spawn_scorer(
        *impl->system, {impl->device_actors, options.rescore_period, impl->time, impl->metrics});
  }

  registry_config registry;
  registry.store = std::move(store);
  registry.locate_remote = remote->locate;
  registry.repository = std::make_shared<model_repository>(std::move(*repository));
  impl->hub = spawn_watch_hub(*impl->system);
  registry.pool = impl->pool;  // handles copied into the config: the actor starts on its own thread
  registry.hub = impl->hub;
  registry.routes = impl->routes;
  registry.time = impl->time;
  registry.max_models = options.max_models;
  registry.metrics = impl->metrics;
  registry.initial = std::move(*stored);
  registry.offload = [describer = impl->describer.get()](std::function<void()> task) {
    describer->submit(std::move(task));
  };
  registry.on_batching = [batcher = impl->batcher.get()](
                             const std::string& model,
                             const std::optional<batching_options>& options) {
    batcher->set_model_options(model, options);
  };
  auto repository_ptr = registry.repository;
  impl->registry = spawn_registry(*impl->system, std::move(registry));
  version_manager_config versions;
  versions.registry = impl->registry;
  versions.devices = impl->device_actors;
  versions.metrics = impl->metrics;
  versions.repository = std::move(repository_ptr);
  versions.time = impl->time;
  versions.offload = [describer = impl->describer.get()](std::function<void()> task) {
    describer->submit(std::move(task));
  };
  // The watch reports to the manager, which is spawned after it: the handle is set before any
  // served model is (a watch is added only by the manager's looks, once something is served).
  auto manager_handle = std::make_shared<version_manager_actor>();
  if (auto watcher = dir_watch::start([manager_handle](const std::string& model) {
        caf::anon_send(*manager_handle, msg::look_now{model});
      }))
    impl->watcher = std::move(*watcher);
  versions.watcher = impl->watcher;
  impl->lister = std::make_unique<warm::executor>(2);
  versions.look_remote =
      [remote = remote->remote](const std::string& base) -> expected<std::vector<version_file>> {
    return sources::look_at_remote_versions(*remote, base);
  };
  versions.offload_remote = [lister = impl->lister.get()](std::function<void()> task) {
    lister->submit(std::move(task));
  };
  versions.poll = options.version_poll;
  versions.settle = options.version_settle;
  impl->versions = spawn_version_manager(*impl->system, std::move(versions));
  *manager_handle = impl->versions;
  impl->options = std::move(options);
  return std::unique_ptr<runtime>(new runtime(std::move(impl)));
}

runtime::runtime(std::unique_ptr<runtime_impl> impl) : impl_(std::move(impl)) {}

runtime::~runtime() {
  auto& i = *impl_;
  caf::anon_send_exit(i.versions, caf::exit_reason::user_shutdown);
  i.versions = nullptr;
  caf::anon_send_exit(i.registry, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.pool, caf::exit_reason::user_shutdown);
  if (i.scorer) caf::anon_send_exit(i.scorer, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(i.hub, caf::exit_reason::user_shutdown);
  i.hub = nullptr;
  if (i.tier) caf::anon_send_exit(i.tier, caf::exit_reason::user_shutdown);
  i.tier = nullptr;
  i.scorer = nullptr;
  for (auto& d : i.device_actors)
    caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  i.registry = nullptr;
  i.pool = nullptr;
  i.device_actors.clear();
  i.system->await_all_actors_done();
  i.batcher->stop();    // what waits for a batch delay is queued to run now
  i.executor.reset();   // no actor is left to submit: run what is queued
  i.describer.reset();  // answers the describes queued (their replies to the registry are dropped)
  i.fetcher.reset();    // fetches queued run and report to the tier, which is gone
  i.lister.reset();     // listings queued run and report to the version manager, which is gone
  i.watcher.reset();    // no look holds it any more: its thread stops here
  // Every slot left in the hit path's index gives its weights back before the devices go.
  for (auto& slot : i.routes->slots())
    slot->withdraw();
  {
    // Weights dropped from now on (a lease or a message that outlives the runtime) free inline.
    std::lock_guard<std::mutex> lock(i.reclaim_to->mutex);
    i.reclaim_to->open = nullptr;
  }
  i.reclaimer.reset();  // frees everything withdrawn so far
  i.system.reset();
}

const std::vector<std::shared_ptr<device>>& runtime::devices() const {
  return impl_->devices;
}

const runtime_metrics& runtime::metrics() const {
  return *impl_->metrics;
}

runtime_actors actors_of(runtime& rt) {
  auto& i = rt.impl();
  return {i.system.get(), i.registry, i.pool, i.device_actors};
}

// ---- registration and status ----------------------------------------------------------------

void runtime::register_model(const std::string& id, model_info info, bool load_now, bool sync,
                             callback<void> done) {
  caf::anon_send(impl_->registry,
                 msg::register_model{id, std::move(info), load_now, sync, std::move(done)});
}

std::future<expected<void>> runtime::register_model(const std::string& id, model_info info,
                                                    bool load_now, bool sync) {
  auto [cb, future] = promised<void>();
  register_model(id, std::move(info), load_now, sync, std::move(cb));
  return std::move(future);
}

void runtime::unregister_model(const std::string& id, callback<void> done) {
  caf::anon_send(impl_->registry, msg::unregister_model{id, std::move(done)});
}

std::future<expected<void>> runtime::unregister_model(const std::string& id) {
  auto [cb, future] = promised<void>();
  unregister_model(id, std::move(cb));
  return std::move(future);
}

void runtime::status(const std::string& id, callback<model_status> done) {
  caf::anon_send(impl_->registry,
                 msg::get_status{id, runtime_detail::with_tier(impl_->tier, std::move(done))});
}

std::future<expected<model_status>> runtime::status(const std::string& id) {
  auto [cb, future] = promised<model_status>();
  status(id, std::move(cb));
  return std::move(future);
}

void runtime::list_models(const std::string& after, std::uint32_t limit,
                          callback<std::vector<model_status>> done) {
  caf::anon_send(
      impl_->registry,
      msg::list_models{after, limit, runtime_detail::with_tier(impl_->tier, std::move(done))});
}

std::future<expected<std::vector<model_status>>> runtime::list_models(const std::string& after,
                                                                      std::uint32_t limit) {
  auto [cb, future] = promised<std::vector<model_status>>();
  list_models(after, limit, std::move(cb));
  return std::move(future);
}

void runtime::unload(const std::string& id, callback<void> done) {
  caf::anon_send(impl_->registry, msg::unload_model{id, std::move(done)});
}

std::future<expected<void>> runtime::unload(const std::string& id) {
  auto [cb, future] = promised<void>();
  unload(id, std::move(cb));
  return std::move(future);
}

void runtime::retry(const std::string& id, callback<void> done) {
  caf::anon_send(impl_->registry, msg::retry_model{id, std::move(done)});
}

std::future<expected<void>> runtime::retry(const std::string& id) {
  auto [cb, future] = promised<void>();
  retry(id, std::move(cb));
  return std::move(future);
}

void runtime::describe(const std::string& id, callback<model_metadata> done) {
  caf::anon_send(impl_->registry, msg::describe_model{id, std::move(done)});
}

std::future<expected<model_metadata>> runtime::describe(const std::string& id) {
  auto [cb, future] = promised<model_metadata>();
  describe(id, std::move(cb));
  return std::move(future);
}

void runtime::ensure_loaded(const std::string& id, bool sync, callback<void> done) {
  auto kind = sync ? use_kind::wait : use_kind::proactive;
  caf::anon_send(impl_->registry,
                 msg::use_model{id, kind, impl_->time->now(), [done](expected<acquired> a) {
                                  done(a ? expected<void>{} : expected<void>{std::move(a).error()});
                                }});
}

std::future<expected<void>> runtime::ensure_loaded(const std::string& id, bool sync) {
  auto [cb, future] = promised<void>();
  ensure_loaded(id, sync, std::move(cb));
  return std::move(future);
}

// ---- inference ------------------------------------------------------------------------------

namespace {

// Counts an answered inference by outcome (and a miss's wait, and the latency of one answered
// with outputs: from `arrived` to now, by the runtime's clock) before handing it over.
void count_outcome(runtime_metrics& m, const clock& time, const expected<infer_result>& result,
                   timestamp arrived) {
  if (!result) {
    m.requests_error.add();
    return;
  }
  m.request_seconds.observe(std::chrono::duration<double>(time.now() - arrived).count());
  if (result->cache_hit) {
    m.requests_hit.add();
  } else {
    m.requests_miss.add();
    m.cache_miss_wait.observe(result->load_wait_ms / 1e3);
  }
}

// Queues a held lease's inference, its inputs checked (`rows` rows), for its model's next batched
// pass.
void submit_batched(runtime_impl& impl, std::shared_ptr<acquired> held, infer_request request,
                    std::uint64_t rows, callback<infer_result> done) {
  auto counted = [metrics = impl.metrics, time = impl.time, arrived = held->arrived,
                  done = std::move(done)](expected<infer_result> result) {
    count_outcome(*metrics, *time, result, arrived);
    done(std::move(result));
  };
  impl.batcher->submit(std::move(held), std::move(request), rows, std::move(counted));
}

// Runs a held lease's inference, its inputs checked (`rows` rows): in its model's next batched
// pass, or on the executor, answering from there. The lease is released before `done` is called
// (execute), the slot reference right after.
void submit_inference(runtime_impl& impl, std::shared_ptr<acquired> held, infer_request request,
                      std::uint64_t rows, callback<infer_result> done) {
  // Automatic batching only where a pass runs in this process: the batcher calls the blocking
  // run(), and a model runtime's inference would hold an inference thread while it works.
  const auto& m = held->lease.model();
  if (m.io().batched && (m.host_id().empty() ? impl.batcher->batches_queued(held->model)
                                             : impl.batcher->batches(held->model)))
    return submit_batched(impl, std::move(held), std::move(request), rows, std::move(done));
  auto task = std::make_shared<std::pair<infer_request, callback<infer_result>>>(std::move(request),
                                                                                 std::move(done));
  impl.executor->submit([impl = &impl, held = std::move(held), task = std::move(task), rows] {
    auto answer = [impl, held, task](expected<infer_result> result) {
      held->lease.reset();  // before the callback: the model may be unloaded from here on
      held->slot.reset();
      count_outcome(*impl->metrics, *impl->time, result, held->arrived);
      task->second(std::move(result));
    };
    // The model answers when it is done: at once for warm's own devices, later (from a model
    // runtime's link) for a model in another process, this thread free meanwhile.
    held->lease.model().run_then(
        task->first.inputs, rows, [held, task, answer, rows](expected<std::vector<tensor>> ran) {
          ran = checked_outputs(std::move(ran), held->lease.model().io(), held->model,
                                rows);  // the lease holds it
          if (!ran) return answer(std::move(ran).error());
          infer_result result;
          result.outputs = std::move(*ran);
          result.model = held->model;
          result.cache_hit = held->hit;
          result.load_wait_ms = held->wait_ms;
          answer(std::move(result));
        });
  });
}

// submit_inference for a lease a miss waited for: the inputs are checked against the model it
// got, and a refused request is answered at once, its lease given back first.
void check_and_submit(runtime_impl& impl, std::shared_ptr<acquired> held, infer_request request,
                      callback<infer_result> done) {
  auto rows = check_leased(held->lease, request);
  if (!rows) {
    held->lease.reset();
    held->slot.reset();
    count_outcome(*impl.metrics, *impl.time, rows.error(), held->arrived);
    return done(std::move(rows).error());
  }
  submit_inference(impl, std::move(held), std::move(request), *rows, std::move(done));
}

}  // namespace

void runtime::infer(infer_request request, callback<infer_result> done) {
  auto& i = *impl_;
  auto now = i.time->now();
  std::optional<expected<infer_result>> answered;
  {
    route_table::read_guard reading;  // the slot stays alive until its lease ends on this thread
    if (auto lease = i.routes->lease(request.target, now)) {
      auto served = lease.slot().model();  // a copy: the slot may go once the guard ends
      // Inputs are checked once, here: a refused request is answered at once, whatever its size.
      auto batch = check_leased(lease, request);
      const auto& m = lease.model();
      const bool batched = batch && m.io().batched && i.batcher->batches(served);
      if (batched || (batch && m.cost(*batch) > i.options.inline_inference_limit)) {
        // Batched, or too heavy for the caller's thread: the lease travels with the task, and a
        // reference to the slot with it (the guard covers this thread only).
        auto held = std::make_shared<acquired>();
        held->model = std::move(served);
        held->slot = lease.share();
        held->lease = std::move(lease);
        held->hit = true;
        held->arrived = now;
        if (batched)
          return submit_batched(i, std::move(held), std::move(request), *batch, std::move(done));
        return submit_inference(i, std::move(held), std::move(request), *batch, std::move(done));
      }
      answered = batch ? run_checked(std::move(lease), served, request, *batch, true, 0)
                       : expected<infer_result>(std::move(batch).error());
    }
  }
  if (answered) {
    count_outcome(*i.metrics, *i.time, *answered, now);
    return done(std::move(*answered));
  }
  // A miss another instance of the cluster may serve (runtime_options::miss_handler).
  if (i.options.miss_handler && !request.forwarded &&
      i.options.miss_handler(i.routes->resolve(request.target), request, done))
    return;
  // A miss: the model actor answers with a lease once the model is loaded; the inference then
  // runs on the executor, never on the actor's thread.
  auto shared = std::make_shared<std::pair<infer_request, callback<infer_result>>>(
      std::move(request), std::move(done));
  auto target = shared->first.target;
  auto* impl = impl_.get();
  caf::anon_send(
      i.registry,
      msg::use_model{target, use_kind::wait, now, [impl, shared, now](expected<acquired> a) {
                       if (!a) {
                         impl->metrics->requests_error.add();
                         return shared->second(std::move(a).error());
                       }
                       a->arrived = now;
                       check_and_submit(*impl, std::make_shared<acquired>(std::move(*a)),
                                        std::move(shared->first), std::move(shared->second));
                     }});
}

std::future<expected<infer_result>> runtime::infer(infer_request request) {
  auto [cb, future] = promised<infer_result>();
  infer(std::move(request), std::move(cb));
  return std::move(future);
}

// ---- watching ---------------------------------------------------------------------------------

std::uint64_t runtime::watch(std::function<void(const model_event&)> listener) {
  auto id = impl_->next_watch.fetch_add(1);
  caf::anon_send(impl_->hub, msg::add_watcher{id, std::move(listener)});
  return id;
}

void runtime::unwatch(std::uint64_t id) {
  caf::anon_send(impl_->hub, msg::remove_watcher{id});
}

}  // namespace warm
