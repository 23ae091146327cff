#include "actors/model_actor.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "actors/protocol/watch_hub_protocol.hpp"
#include "core/rate_meter.hpp"
#include "storage/located_file.hpp"

namespace warm {
namespace {

// A waiting use, answered once the load is over: through its response promise (a model_use
// request) or straight to the client's callback (a client_use).
struct waiter {
  timestamp arrival;
  caf::typed_response_promise<msg::granted> promise;
  once_callback<acquired> client;
  bool to_client = false;

  void answer(expected<acquired> result) {
    if (to_client) return client(std::move(result));
    if (result)
      promise.deliver(msg::granted{std::make_shared<acquired>(std::move(*result))});
    else
      promise.deliver(to_caf_error(result.error()));
  }
};

struct model_state_data {
  std::string id;
  std::uint64_t generation = 0;  // with `id`, names this registration to the pool
  model_location where;
  std::uint64_t bytes = 0;
  loader_pool_actor pool;
  std::shared_ptr<route_table> routes;
  std::shared_ptr<const clock> time;
  watch_hub_actor hub;  // the watch hub: every state change is reported there

  model_state state = model_state::not_loaded;
  std::shared_ptr<serving_slot> slot;                    // while LOADED
  device_actor slot_device;                              // the device actor holding `slot`
  std::string device;                                    // where loaded or loading
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // LOADING: bytes copied so far
  std::vector<waiter> waiters;
  bool load_pending = false;  // the pool holds a load of ours (queued or running)
  bool started = false;       // ... and it has started
  bool unregistered = false;

  // Uses are counted in two places: hits by the slot (the hit path never reaches this actor),
  // uses that found no slot (misses, waiting or failing) by this actor.
  std::uint64_t misses = 0;
  std::uint64_t slot_uses_counted = 0;  // hits on past slots, folded in when a slot is dropped
  timestamp last_used{};
  load_time_stats loads;
  rate_meter rate;  // uses per second, sampled at each use seen here and each status query
  std::optional<warm::error> last_error;
  timestamp retry_at{};
  std::optional<file_seen> failed_file;  // the file as the failed load saw it
  std::function<void(std::function<void()>)> offload;
  // Uses that would fail fast, held while the file is looked at (file_checked answers).
  std::vector<std::pair<use_kind, waiter>> held;
  bool checking = false;

  // Stopping (runtime shutdown) answers whoever still waits.
  ~model_state_data() {
    for (auto& w : waiters)
      w.answer(make_error(errc::unavailable, "model '" + id + "': the runtime is shutting down"));
    for (auto& h : held)
      h.second.answer(
          make_error(errc::unavailable, "model '" + id + "': the runtime is shutting down"));
  }

  msg::registration who() const { return {id, generation}; }
};

using self_ptr = model_actor::stateful_pointer<model_state_data>;

// Every transition goes through here, so watchers see each one. `reason`: why a loaded model
// left its device (model_event::reason), else empty.
void set_state(self_ptr self, model_state next, const char* reason = "") {
  auto& s = self->state;
  if (s.state == next) return;
  model_event e;
  e.model = s.id;
  e.previous = s.state;
  e.state = next;
  e.device = s.device;
  e.reason = reason;
  if (next == model_state::loading_failed) e.error = s.last_error;
  s.state = next;
  if (s.hub) self->send(s.hub, msg::state_changed{std::move(e)});
}

double ms_between(timestamp a, timestamp b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Forgets the slot (evicted, withdrawn or unregistered); its uses stay counted. `reason`: why,
// when known (to_string(eviction_reason)), told to watchers.
void drop_slot(self_ptr self, const char* reason = "") {
  auto& s = self->state;
  if (!s.slot) return;
  s.slot_uses_counted += s.slot->uses();
  if (s.slot->uses() && s.slot->last_used() > s.last_used) s.last_used = s.slot->last_used();
  s.routes->erase_slot(s.id, s.slot.get());
  s.slot.reset();
  s.slot_device = nullptr;
  if (s.state == model_state::loaded) set_state(self, model_state::not_loaded, reason);
  s.device.clear();
}

std::uint32_t waiter_count(const model_state_data& s) {
  return static_cast<std::uint32_t>(std::min<std::size_t>(s.waiters.size(), UINT32_MAX));
}

void request_load(self_ptr self, bool waiting, timestamp when) {
  auto& s = self->state;
  if (s.started) return;  // a running load will answer every waiter
  if (!s.load_pending && s.state != model_state::loading) set_state(self, model_state::queued);
  s.load_pending = true;
  self->send(s.pool, msg::enqueue_load{s.who(), caf::actor_cast<model_actor>(self), s.where,
                                       s.bytes, waiting, when, waiter_count(s)});
}

void stop_if_done(self_ptr self) {
  if (self->state.unregistered && !self->state.load_pending) self->quit();
}

acquired lease_of(const model_state_data& s, serving_slot::lease lease, bool hit, double wait_ms) {
  return {s.id, s.slot, std::move(lease), hit, wait_ms};
}

void answer_waiters(self_ptr self) {
  auto& s = self->state;
  auto now = s.time->now();
  auto waiters = std::move(s.waiters);
  s.waiters.clear();
  for (auto& w : waiters) {
    auto lease = s.slot->try_acquire(now, false);  // the load was their use, counted as a miss
    if (!lease) {  // evicted before we could hand it out: wait for the next load
      s.waiters.push_back(std::move(w));
      continue;
    }
    w.answer(lease_of(s, std::move(lease), false, ms_between(w.arrival, now)));
  }
  if (!s.waiters.empty()) {
    drop_slot(self);
    request_load(self, true, s.waiters.front().arrival);
  }
}

void fail_waiters(self_ptr self, const warm::error& error) {
  auto waiters = std::move(self->state.waiters);
  self->state.waiters.clear();
  for (auto& w : waiters)
    w.answer(error);
}

std::uint64_t total_uses(const model_state_data& s) {
  return s.slot_uses_counted + (s.slot ? s.slot->uses() : 0) + s.misses;
}

model_status status_of(model_state_data& s) {
  model_status st;
  auto now = s.time->now();
  s.rate.sample(total_uses(s), now);
  st.requests_per_second = s.rate.per_second();
  st.id = s.id;
  st.state = s.state;
  st.device = s.device;
  st.bytes = s.bytes;
  st.hits = s.slot_uses_counted + (s.slot ? s.slot->uses() : 0);
  st.requests = st.hits + s.misses;
  st.in_flight = s.slot ? s.slot->in_flight() : 0;
  auto last = s.last_used;
  if (s.slot && s.slot->uses() && s.slot->last_used() > last) last = s.slot->last_used();
  st.idle_seconds = st.requests ? std::chrono::duration<double>(now - last).count() : -1;
  st.loads = s.loads;
  if (s.state == model_state::loaded) st.loaded_bytes = s.bytes;
  if (s.slot) st.io = s.slot->io();  // what the load declared (a runtime's model: only then known)
  if (s.state == model_state::loading && s.progress)
    st.loaded_bytes = s.progress->load(std::memory_order_relaxed);
  if (s.state == model_state::loading_failed) {
    st.last_error = s.last_error;
    st.retry_in_seconds = std::max(0.0, std::chrono::duration<double>(s.retry_at - now).count());
  }
  return st;
}

// A use, as far as it can be answered at once: a lease (a hit), an error (unregistered, or failing
// fast until retry_at), or an empty lease for a proactive use (its load queued). nullopt: the
// use must wait for the load (wait_for_load).
std::optional<expected<acquired>> use_now(self_ptr self, use_kind kind, timestamp arrival) {
  auto& s = self->state;
  auto now = s.time->now();
  if (s.unregistered) return make_error(errc::not_found, "model '" + s.id + "' is not registered");
  if (s.slot) {
    auto lease = s.slot->try_acquire(now);
    if (lease) return lease_of(s, std::move(lease), true, 0);
    drop_slot(self);  // withdrawn: the eviction notice is on its way
  }
  ++s.misses;
  s.rate.sample(total_uses(s), now);
  s.last_used = std::max(s.last_used, arrival);
  if (s.state == model_state::loading_failed) {
    if (now < s.retry_at)
      return make_error(
          s.last_error->code == errc::model_too_large ? errc::model_too_large : errc::load_failed,
          s.last_error->message);
    set_state(self, model_state::not_loaded);
  }
  if (kind == use_kind::proactive) {
    if (!s.load_pending) request_load(self, false, s.last_used);
    return acquired{s.id, nullptr, {}, false, 0};
  }
  return std::nullopt;
}

// Whether a use now must first learn whether the model's file changed since its load failed:
// it would fail fast, and the failed load saw the file. Uses that arrive while a look is under
// way wait for it too, so that they are answered in order.
bool must_look(const model_state_data& s) {
  if (s.checking) return true;
  return !s.unregistered && !s.slot && s.state == model_state::loading_failed && s.failed_file &&
         s.offload && s.time->now() < s.retry_at;
}

// Holds a use that must_look, and asks the offload for the file once per look.
void hold(self_ptr self, use_kind kind, waiter w) {
  auto& s = self->state;
  s.held.emplace_back(kind, std::move(w));
  if (s.checking) return;
  s.checking = true;
  s.offload([me = caf::actor_cast<model_actor>(self), where = s.where] {
    caf::anon_send(me, msg::file_checked{look_at(where)});
  });
}

// Keeps a waiting use: one load per cold start, however many wait.
void wait_for_load(self_ptr self, waiter w) {
  auto& s = self->state;
  bool first = s.waiters.empty();
  auto arrival = w.arrival;
  s.waiters.push_back(std::move(w));
  if (first)
    request_load(self, true, arrival);
  else if (s.load_pending && !s.started)  // the queue shows how many wait (inspection)
    self->send(s.pool, msg::load_waiters{s.who(), waiter_count(s)});
}

caf::result<msg::granted> on_use(self_ptr self, msg::model_use& m) {
  if (must_look(self->state)) {
    auto promise = self->make_response_promise<msg::granted>();
    hold(self, m.kind, {m.arrival, promise, {}, false});
    return promise;
  }
  if (auto now = use_now(self, m.kind, m.arrival)) {
    if (!*now) return to_caf_error(now->error());
    return msg::granted{std::make_shared<acquired>(std::move(**now))};
  }
  auto promise = self->make_response_promise<msg::granted>();
  wait_for_load(self, {m.arrival, promise, {}, false});
  return promise;
}

void on_client_use(self_ptr self, msg::client_use& m) {
  if (must_look(self->state)) return hold(self, m.kind, {m.arrival, {}, std::move(m.done), true});
  if (auto now = use_now(self, m.kind, m.arrival)) return m.done(std::move(*now));
  wait_for_load(self, {m.arrival, {}, std::move(m.done), true});
}

// An operator's unload. A loaded copy is withdrawn (inferences in flight finish on it); a queued
// background load is cancelled. A load that has started, or that requests wait for, is not
// interrupted: the answer says so, and unloading once it is loaded works.
caf::result<void> on_unload(self_ptr self) {
  auto& s = self->state;
  if (s.started || !s.waiters.empty())
    return to_caf_error(
        make_error(errc::unavailable,
                   "model '" + s.id + "' is loading for waiting requests; unload it once loaded"));
  if (s.load_pending) self->send(s.pool, msg::cancel_load{s.who()});
  if (s.slot) self->send(s.slot_device, msg::withdraw_slot{s.id, s.slot});
  drop_slot(self, to_string(eviction_reason::unload));
  return caf::unit;
}

// Leaves LOADING_FAILED for NOT_LOADED and has the pool forget the failure records, so that the
// next use loads (an operator's retry, or a file that changed).
void forget_failure(self_ptr self) {
  auto& s = self->state;
  self->send(s.pool, msg::forget_failures{s.who()});  // before any load this starts
  s.retry_at = {};
  s.failed_file.reset();
  if (s.state == model_state::loading_failed) {
    s.last_error.reset();
    set_state(self, model_state::not_loaded);
  }
}

// A look at the file is back: a changed file makes the failure stale. The held uses are then
// answered in order, as if they arrived now (fail fast, or wait for the new load).
void on_file_checked(self_ptr self, msg::file_checked& m) {
  auto& s = self->state;
  s.checking = false;
  if (s.state == model_state::loading_failed && s.failed_file && m.file != *s.failed_file)
    forget_failure(self);
  auto held = std::move(s.held);
  s.held.clear();
  for (auto& [kind, w] : held) {
    if (auto now = use_now(self, kind, w.arrival))
      w.answer(std::move(*now));
    else
      wait_for_load(self, std::move(w));
  }
}

model_actor::behavior_type model_behavior(self_ptr self,
                                          std::shared_ptr<model_actor_config> config) {
  auto& s = self->state;
  s.id = config->id;
  s.generation = config->generation;
  s.where = config->where;
  s.bytes = config->bytes;
  s.pool = config->pool;
  s.routes = config->routes;
  s.time = config->time;
  s.hub = config->hub;
  s.offload = config->offload;
  return {
      [=](msg::model_use& m) { return on_use(self, m); },
      [=](msg::client_use& m) { on_client_use(self, m); },
      [=](msg::model_status_request&) { return status_of(self->state); },
      [=](msg::load_started& m) {
        auto& s = self->state;
        s.started = true;
        s.device = m.device;
        s.progress = m.progress;
        set_state(self, model_state::loading);
      },
      [=](msg::load_done& m) {
        auto& s = self->state;
        s.load_pending = s.started = false;
        s.progress.reset();
        auto device = caf::actor_cast<device_actor>(self->current_sender());
        if (s.unregistered) {
          self->send(device, msg::withdraw_slot{s.id, m.slot});
          return stop_if_done(self);
        }
        drop_slot(self);
        s.slot = m.slot;
        s.bytes = m.slot->bytes();  // what it measured replaces the prediction for later loads
        s.slot_device = device;
        s.device = m.device;
        s.last_error.reset();
        set_state(self, model_state::loaded);
        auto& l = s.loads;  // Welford's running mean and variance
        double x = m.seconds * 1e3;
        ++l.count;
        double delta = x - l.mean_ms;
        l.mean_ms += delta / l.count;
        l.variance_ms2 += (delta * (x - l.mean_ms) - l.variance_ms2) / l.count;
        s.routes->put_slot(s.id, s.slot);
        answer_waiters(self);
      },
      [=](msg::load_failed& m) {
        auto& s = self->state;
        s.load_pending = s.started = false;
        s.progress.reset();
        s.device.clear();
        s.retry_at = m.retry_at;
        s.failed_file = m.file;
        if (m.measured) s.bytes = m.measured;  // the next load reserves what it took
        auto code =
            m.error.code == errc::model_too_large ? errc::model_too_large : errc::load_failed;
        s.last_error = make_error(code, m.error.message);
        set_state(self, model_state::loading_failed);
        fail_waiters(self, *s.last_error);
        stop_if_done(self);
      },
      [=](msg::load_cancelled&) {
        auto& s = self->state;
        s.load_pending = s.started = false;
        s.progress.reset();
        if (!s.unregistered && !s.waiters.empty())
          request_load(self, true, s.waiters.front().arrival);
        else if (!s.unregistered && s.state == model_state::queued)
          set_state(self, model_state::not_loaded);  // an operator's unload cancelled it
        stop_if_done(self);
      },
      [=](msg::unload_loaded&) -> caf::result<void> { return on_unload(self); },
      [=](msg::slot_evicted& m) {
        // Evicted by the device (for room, replaced by a newer registration's copy, or lost).
        if (self->state.slot == m.slot) drop_slot(self, to_string(m.reason));
      },
      [=](msg::forget_failure&) { forget_failure(self); },
      [=](msg::file_checked& m) { on_file_checked(self, m); },
      [=](msg::model_unregister&) {
        auto& s = self->state;
        s.unregistered = true;
        // Always told, pending load or not: the pool also forgets the model's failure records,
        // so a model registered again under this id starts with a clean slate.
        self->send(s.pool, msg::cancel_load{s.who()});
        if (s.slot) self->send(s.slot_device, msg::withdraw_slot{s.id, s.slot});
        drop_slot(self);
        set_state(self, model_state::not_found);
        auto gone = make_error(errc::not_found, "model '" + s.id + "' was unregistered");
        fail_waiters(self, gone);
        for (auto& h : std::exchange(s.held, {}))
          h.second.answer(gone);  // a look may be under way
        stop_if_done(self);
      },
  };
}

}  // namespace

model_actor spawn_model_actor(caf::actor_system& system, const model_actor_config& config) {
  return system.spawn(model_behavior, std::make_shared<model_actor_config>(config));
}

}  // namespace warm
