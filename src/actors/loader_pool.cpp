#include "actors/loader_pool.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <unordered_map>
#include <variant>

#include "actors/loader_worker.hpp"
#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/loader_worker_protocol.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "core/crash_suspects.hpp"
#include "core/failure_table.hpp"
#include "core/load_queue.hpp"
#include "storage/runtime_manifest.hpp"
#include "warm/backend.hpp"
#include "warm/units.hpp"

namespace warm {
namespace {

// ---- the pool -------------------------------------------------------------------------------

// settling: loaded, and measured more than was reserved; the device actor reserves the rest.
enum class phase { queued, reserving, loading, settling };

struct load_record {
  std::string model;
  msg::registration who;  // whose load: {model, generation}
  model_actor owner;
  model_location where;
  std::uint64_t bytes = 0;
  load_queue::entry entry;  // how it was queued, to queue it again after a refusal or failure
  phase at = phase::queued;
  std::size_t device = 0;
  std::uint32_t attempts = 0;
  std::uint32_t waiters = 0;  // requests waiting on it, as the owner last told (inspection)
  bool cancelled = false;
  timestamp queued_at{};          // when it last entered the queue (metrics: queue wait)
  timestamp started_at{};         // when it last left the queue (inspection: elapsed)
  std::optional<file_seen> file;  // as its last failed attempt saw it
  std::uint64_t measured = 0;     // what the model took when its charge could not be settled
};

struct pool_state {
  loader_pool_config config;
  std::vector<device_actor> devices;
  std::vector<std::string> device_names;
  std::vector<bool> blocked;  // refused a reservation; waits for device_freed
  std::vector<loader_worker_actor> idle_workers;
  load_queue queue;
  failure_table failures{std::chrono::minutes(10)};
  crash_suspects suspects;                             // models running when a model runtime died
  std::unordered_map<std::string, load_record> loads;  // by model id
  std::unordered_map<std::string, msg::enqueue_load>
      deferred;               // a new registration behind a cancelled load
  std::uint32_t running = 0;  // reserving + loading
  std::uint64_t started = 0;
  std::uint64_t failed = 0;
  runtime_metrics* metrics = nullptr;  // config.metrics
};

using self_ptr = loader_pool_actor::stateful_pointer<pool_state>;

timestamp now(self_ptr self) {
  return self->state.config.time->now();
}

void requeue(pool_state& s, load_record& r) {
  r.at = phase::queued;
  r.queued_at = s.config.time->now();
  if (r.entry.kind == load_queue::priority::waiting)
    s.queue.push_waiting(r.model, r.entry.first_wait);
  else
    s.queue.push_proactive(r.model, r.entry.last_used);
}

void forget(pool_state& s, const std::string& model) {
  s.loads.erase(model);
}

void enqueue(self_ptr self, msg::enqueue_load& m);

// The load is over (done, failed or cancelled): forget it and start a deferred successor.
// `model` is taken by value: callers pass the record's own id, which forget() frees.
void finish(self_ptr self, std::string model) {
  auto& s = self->state;
  forget(s, model);
  auto d = s.deferred.find(model);
  if (d != s.deferred.end()) {
    auto next = std::move(d->second);
    s.deferred.erase(d);
    enqueue(self, next);
  }
}

void fail(self_ptr self, load_record& r, warm::error error) {
  auto& s = self->state;
  ++s.failed;
  auto retry_at = s.failures.next_expiry(r.model, now(self));
  self->send(r.owner, msg::load_failed{std::move(error), retry_at, r.file, r.measured});
  finish(self, r.model);
}

// Where a queued load may go now: a device index, `blocked` (wait for room), or a final error.
struct blocked_t {};
using placement = std::variant<std::size_t, blocked_t, warm::error>;

placement place(self_ptr self, const load_record& r) {
  auto& s = self->state;
  auto t = now(self);
  bool runs_any = false, eligible_any = false, fits_any = false, blocked_any = false;
  std::optional<std::size_t> not_ready;  // a device that would do once it is ready again
  std::optional<std::size_t> best;
  std::uint64_t best_free = 0;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    auto& dev = *s.config.devices[i];
    if (!runs_on(r.where, dev)) continue;
    runs_any = true;
    if (!s.failures.eligible(r.model, s.device_names[i], t)) continue;
    eligible_any = true;
    if (!dev.ready()) {  // its capacity is not known now either
      not_ready = i;
      continue;
    }
    if (r.bytes > dev.capacity()) continue;
    fits_any = true;
    if (s.blocked[i]) {
      blocked_any = true;
      continue;
    }
    auto free = dev.free();
    if (!best || free > best_free) best = i, best_free = free;
  }
  if (!runs_any) {
    std::string names;
    for (const auto& name : s.device_names)
      names += (names.empty() ? "" : ", ") + name;
    auto kind = find_backend(r.where.kind);
    if (!kind && is_manifest(r.where.path))  // served only by a model runtime
      return make_error(errc::load_failed,
                        r.model + ": no device serves " + r.where.kind +
                            " models (devices: " + names +
                            "); a model runtime does: warmd --runtime NAME=grpc-exec:COMMAND "
                            "(warm-pyruntime serves sklearn and xgboost) or NAME=grpc:ADDR");
    return make_error(errc::load_failed, r.model + ": " +
                                             (kind ? "no device can run " + r.where.kind +
                                                         " models (devices: " + names + ")"
                                                   : kind.error().message));
  }
  if (!eligible_any) {
    auto latest = s.failures.latest(r.model, t);
    return latest ? latest->error
                  : make_error(errc::load_failed, r.model + ": no device may load it");
  }
  if (!best && not_ready && !blocked_any) {
    // Only devices that are down (a model runtime restarting) could take it: fail now rather
    // than hold the request for a restart that may not come. No failure record: the next use
    // tries again.
    auto& dev = *s.config.devices[*not_ready];
    auto state = dev.state();
    return make_error(errc::unavailable, r.model + ": " + dev.name() + " is not ready" +
                                             (state.empty() ? "" : " (" + state + ")"));
  }
  if (!fits_any)
    return make_error(errc::model_too_large,
                      r.model + ": " + format_bytes(r.bytes) +
                          " exceed the capacity of every device it may load on");
  if (!best) return blocked_t{};
  return *best;
}

// Keeps the queue gauges current; called after every change (dispatch ends each handler).
void publish(pool_state& s) {
  s.metrics->load_queue_length.set(static_cast<std::int64_t>(s.queue.size()));
  s.metrics->loads_running.set(s.running);
}

void on_reserved(self_ptr self, const msg::registration& who, msg::reserve_result& m);

void dispatch(self_ptr self) {
  auto& s = self->state;
  struct at_exit {
    pool_state& s;
    ~at_exit() { publish(s); }
  } published{s};
  while (s.running < s.config.max_concurrent_loads && !s.queue.empty()) {
    std::optional<placement> chosen;
    auto next = s.queue.pop_first([&](const load_queue::entry& e) {
      auto p = place(self, s.loads.at(e.model));
      if (std::holds_alternative<blocked_t>(p)) return false;
      chosen = std::move(p);
      return true;
    });
    if (!next) return;  // everything left waits for room
    auto& r = s.loads.at(next->model);
    if (auto* error = std::get_if<warm::error>(&*chosen)) {
      s.metrics->load_failures.add();
      fail(self, r, *error);
      continue;
    }
    r.device = std::get<std::size_t>(*chosen);
    r.at = phase::reserving;
    r.started_at = now(self);
    ++s.running;
    self->request(s.devices[r.device], caf::infinite, msg::reserve{r.model, r.bytes})
        .then([self, who = r.who](msg::reserve_result& m) { on_reserved(self, who, m); },
              [self, who = r.who](caf::error& e) {  // the device stopped (the runtime stops)
                msg::reserve_result m;
                m.error = from_caf_error(e);
                on_reserved(self, who, m);
              });
  }
}

void enqueue(self_ptr self, msg::enqueue_load& m) {
  auto& s = self->state;
  const auto& model = m.who.id;
  auto it = s.loads.find(model);
  if (it != s.loads.end() && it->second.who != m.who) {
    // Another registration of the model (unregistered, then registered again) still has a load.
    if (it->second.at != phase::queued) {
      s.deferred[model] = m;  // starts when that load is over
      return;
    }
    s.queue.cancel(model);
    self->send(it->second.owner, msg::load_cancelled{});
    forget(s, model);
    it = s.loads.end();
  }
  if (it == s.loads.end()) {
    load_record r;
    r.model = model;
    r.who = m.who;
    r.owner = m.owner;
    r.where = m.where;
    r.bytes = m.bytes;
    r.entry.model = model;
    r.queued_at = now(self);
    it = s.loads.emplace(model, std::move(r)).first;
  }
  auto& r = it->second;
  r.waiters = m.waiters;
  if (m.waiting) {
    if (r.entry.kind != load_queue::priority::waiting || m.when < r.entry.first_wait)
      r.entry.first_wait = m.when;
    r.entry.kind = load_queue::priority::waiting;
  } else if (r.entry.kind == load_queue::priority::proactive) {
    r.entry.last_used = std::max(r.entry.last_used, m.when);
  }
  if (r.at == phase::queued) {
    if (m.waiting)
      s.queue.push_waiting(model, m.when);
    else
      s.queue.push_proactive(model, m.when);
  }
  dispatch(self);
}

// The records of loads waiting for an answer (reserving, loading) are never replaced: a newer
// registration's load is deferred until they are over. `who` checks that all the same.
load_record* awaited(pool_state& s, const msg::registration& who) {
  auto it = s.loads.find(who.id);
  return it == s.loads.end() || it->second.who != who ? nullptr : &it->second;
}

void on_loaded(self_ptr self, loader_worker_actor worker, const msg::registration& who,
               msg::load_result& m);
void settle(self_ptr self, load_record& r, msg::load_result loaded);

// The load is done and its charge settled: the device actor installs it and tells the owner.
void install(self_ptr self, load_record& r, std::shared_ptr<weights> model, double seconds) {
  auto& s = self->state;
  s.metrics->load_seconds.observe(seconds);
  s.metrics->load_bytes.add(r.bytes);
  s.failures.clear(r.model);
  self->send(s.devices[r.device],
             msg::install{r.model, r.owner, std::move(model), seconds, r.bytes});
  finish(self, r.model);
}

// An attempt failed on r.device: records it, and retries on another eligible device or gives up.
void attempt_failed(self_ptr self, load_record& r, warm::error error,
                    std::optional<file_seen> file) {
  auto& s = self->state;
  s.blocked[r.device] = false;  // the failed load's memory is gone
  s.metrics->load_failures.add();
  s.failures.record(r.model, s.device_names[r.device], now(self), error);
  if (file) r.file = file;
  bool retry = r.attempts < s.config.max_attempts &&
               s.failures.first_eligible(r.model, s.device_names, now(self)).has_value();
  if (retry)
    requeue(s, r);
  else
    fail(self, r, std::move(error));
}

// A device's answer to a reservation.
void on_reserved(self_ptr self, const msg::registration& who, msg::reserve_result& m) {
  auto& s = self->state;
  auto* found = awaited(s, who);
  if (!found) return;
  auto& r = *found;
  if (r.cancelled) {
    --s.running;
    m.reservation.reset();
    self->send(r.owner, msg::load_cancelled{});
    finish(self, r.model);
  } else if (m.reservation) {
    r.at = phase::loading;
    ++r.attempts;
    ++s.started;
    s.metrics->loads_started.add();
    s.metrics->load_queue_wait.observe(
        std::chrono::duration<double>(now(self) - r.queued_at).count());
    auto worker = s.idle_workers.back();
    s.idle_workers.pop_back();
    auto progress = std::make_shared<std::atomic<std::uint64_t>>(0);
    self->send(r.owner, msg::load_started{s.device_names[r.device], progress});
    self->request(
            worker, caf::infinite,
            msg::load_job{s.config.devices[r.device], r.where, std::move(m.reservation), progress})
        .then([self, worker, who](msg::load_result& m) { on_loaded(self, worker, who, m); },
              [self, worker, who](caf::error& e) {  // the worker stopped (the runtime stops)
                msg::load_result m;
                m.error = from_caf_error(e);
                on_loaded(self, worker, who, m);
              });
  } else if (m.error.code == errc::capacity_exhausted) {
    --s.running;
    s.blocked[r.device] = true;
    requeue(s, r);
  } else {
    --s.running;
    s.metrics->load_failures.add();
    fail(self, r, std::move(m.error));
  }
  dispatch(self);
}

// Frees weights the pool no longer wants (none when the load failed) on their reclaimer, never on
// this actor's thread. `device` stays blocked until their bytes are back: then the reclaimer
// tells the pool (device_freed), which unblocks it and dispatches the loads waiting for room.
void drop(self_ptr self, std::size_t device, std::shared_ptr<weights> model) {
  if (!model || !*model) return;
  self->state.blocked[device] = true;
  auto weak_self = caf::actor_cast<caf::weak_actor_ptr>(self);
  std::move(*model).reclaim([weak_self, device] {
    if (auto pool = caf::actor_cast<loader_pool_actor>(weak_self.lock()))
      caf::anon_send(pool, msg::device_freed{device});
  });
}

// A worker's answer to a load job.
void on_loaded(self_ptr self, loader_worker_actor worker, const msg::registration& who,
               msg::load_result& m) {
  auto& s = self->state;
  s.idle_workers.push_back(std::move(worker));
  --s.running;
  auto* found = awaited(s, who);
  if (!found) return dispatch(self);
  auto& r = *found;
  auto device = r.device;
  if (r.cancelled) {
    drop(self, device, std::move(m.model));
    self->send(r.owner, msg::load_cancelled{});
    finish(self, r.model);
  } else if (m.model && (*m.model)->shortfall() > 0) {
    settle(self, r, std::move(m));
  } else if (m.model) {
    install(self, r, std::move(m.model), m.seconds);
  } else {
    attempt_failed(self, r, std::move(m.error), m.file);
  }
  dispatch(self);
}

// The model measured more than was reserved: the device actor reserves the rest (evicting for
// it as for any reservation) before the model may serve; until then it counts as a running load.
void settle(self_ptr self, load_record& r, msg::load_result loaded) {
  auto& s = self->state;
  r.at = phase::settling;
  ++s.running;
  auto model = std::move(loaded.model);
  auto more = (*model)->shortfall();
  auto seconds = loaded.seconds;
  auto answered = [self, who = r.who, model, seconds](msg::reserve_result& m) {
    auto& s = self->state;
    --s.running;
    auto* found = awaited(s, who);
    if (!found) return dispatch(self);
    auto& r = *found;
    if (r.cancelled) {
      drop(self, r.device, model);
      self->send(r.owner, msg::load_cancelled{});
      finish(self, r.model);
    } else if (m.reservation) {
      (*model)->settle(std::move(*m.reservation));
      install(self, r, model, seconds);
    } else {
      auto measured = (*model)->measured_bytes();
      auto reserved = (*model)->bytes();
      auto device = r.device;
      auto dropped = model;
      auto& dev = *s.config.devices[r.device];
      auto code = measured > dev.capacity() ? errc::model_too_large : m.error.code;
      r.measured = r.bytes = measured;  // a retry reserves what the model takes
      attempt_failed(
          self, r,
          make_error(code, r.model + ": it takes " + format_bytes(measured) + " on " + dev.name() +
                               " once loaded, more than the " + format_bytes(reserved) +
                               " reserved, and the rest does not fit: " + m.error.message),
          std::nullopt);                       // requeues it or fails it: `r` may be gone
      drop(self, device, std::move(dropped));  // the device waits for these bytes to come back
    }
    dispatch(self);
  };
  self->request(s.devices[r.device], caf::infinite, msg::reserve{r.model, more, true})
      .then(answered, [answered](caf::error& e) {  // the device stopped (the runtime stops)
        msg::reserve_result m;
        m.error = from_caf_error(e);
        answered(m);
      });
}

loader_pool_actor::behavior_type loader_pool(self_ptr self,
                                             std::shared_ptr<loader_pool_config> config) {
  auto& s = self->state;
  s.config = std::move(*config);
  s.failures = failure_table(s.config.failure_expiry);
  s.suspects = crash_suspects(2, s.config.failure_expiry);
  for (auto& d : s.config.devices)
    s.device_names.push_back(d->name());
  s.blocked.assign(s.config.devices.size(), false);
  if (!s.config.metrics)
    s.config.metrics = std::make_shared<runtime_metrics>(s.config.devices.size());
  s.metrics = s.config.metrics.get();
  for (std::uint32_t i = 0; i < s.config.max_concurrent_loads; ++i) {
    auto worker = self->spawn<caf::detached>(loader_worker, s.config.loader, s.config.reclaim,
                                             s.config.materialize);
    self->link_to(worker);
    s.idle_workers.push_back(worker);
  }
  return {
      [=](msg::attach_devices& m) { self->state.devices = std::move(m.devices); },
      [=](msg::enqueue_load& m) { enqueue(self, m); },
      [=](msg::load_waiters& m) {
        auto& s = self->state;
        auto it = s.loads.find(m.who.id);
        if (it != s.loads.end() && it->second.who == m.who) {
          it->second.waiters = m.waiters;
          return;
        }
        auto d = s.deferred.find(m.who.id);
        if (d != s.deferred.end() && d->second.who == m.who) d->second.waiters = m.waiters;
      },
      [=](msg::forget_failures& m) {
        self->state.failures.clear(m.who.id);
        publish(self->state);
      },
      [=](msg::cancel_load& m) {
        auto& s = self->state;
        const auto& model = m.who.id;
        auto it = s.loads.find(model);
        if (it == s.loads.end() || it->second.who != m.who) {
          if (it == s.loads.end()) s.failures.clear(model);  // no load: only its records to forget
          auto d = s.deferred.find(model);
          if (d != s.deferred.end() && d->second.who == m.who) s.deferred.erase(d);
          return;
        }
        auto& r = it->second;
        s.failures.clear(model);
        if (r.at == phase::queued) {
          s.queue.cancel(model);
          self->send(r.owner, msg::load_cancelled{});
          finish(self, model);
          publish(s);
        } else {
          r.cancelled = true;  // answered when the reservation or the load comes back
        }
      },
      [=](msg::device_freed& m) {
        if (m.device < self->state.blocked.size()) self->state.blocked[m.device] = false;
        dispatch(self);
      },
      [=](msg::models_lost& m) {
        auto& s = self->state;
        if (m.device >= s.device_names.size()) return;
        // A model blamed for the crash is failed there for the failure expiry, not loaded into
        // the restarted process to crash it again; the others come back with the device.
        auto t = now(self);
        auto blamed = s.suspects.crashed(m.in_flight, t);
        for (auto& model : m.models) {
          if (std::binary_search(blamed.begin(), blamed.end(), model)) {
            s.failures.record(model, s.device_names[m.device], t,
                              make_error(errc::load_failed,
                                         m.reason.message + "; " + model +
                                             "'s inference was running when it died, so it is "
                                             "not loaded there again until the failure expires"));
          } else {
            s.failures.record(model, s.device_names[m.device], t, m.reason, m.back_in);
          }
        }
        dispatch(self);
      },
      [=](msg::inspect_loads& m) {
        auto& s = self->state;
        auto t = now(self);
        auto ms = [&](timestamp a) {
          return std::chrono::duration<double, std::milli>(t - a).count();
        };
        std::vector<queued_load> queued;
        for (auto& e : s.queue.snapshot()) {
          bool waiting = e.kind == load_queue::priority::waiting;
          auto& r = s.loads.at(e.model);
          queued.push_back(
              {e.model, waiting, ms(waiting ? e.first_wait : e.last_used), r.attempts, r.waiters});
        }
        std::vector<running_load> running;
        for (auto& [model, r] : s.loads)
          if (r.at != phase::queued)
            running.push_back({model, s.device_names[r.device],
                               r.at == phase::reserving ? "reserving"
                               : r.at == phase::loading ? "loading"
                                                        : "settling",
                               r.attempts, r.waiters, ms(r.started_at), r.bytes});
        std::vector<failure_info> failures;
        for (auto& f : s.failures.snapshot(t))
          failures.push_back({f.model, f.device, f.error,
                              std::chrono::duration<double>(t - f.when).count(),
                              std::chrono::duration<double>(f.expires - t).count()});
        m.done(std::move(queued), std::move(running), std::move(failures), s.started, s.failed);
      },
  };
}

}  // namespace

loader_pool_actor spawn_loader_pool(caf::actor_system& system, loader_pool_config config) {
  if (!config.reclaim) throw std::logic_error("loader_pool_config::reclaim is required");
  return system.spawn(loader_pool, std::make_shared<loader_pool_config>(std::move(config)));
}

void attach_devices(const loader_pool_actor& pool, std::vector<device_actor> device_actors) {
  caf::anon_send(pool, msg::attach_devices{std::move(device_actors)});
}

}  // namespace warm
