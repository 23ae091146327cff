#include "actors/device_actor.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "policy/load_penalty.hpp"
#include "warm/units.hpp"

namespace warm {
namespace {

struct resident {
  std::shared_ptr<serving_slot> slot;
  model_actor owner;
  std::uint64_t seen_uses = 0;  // slot uses already reported to the policy
  timestamp installed{};
  std::uint64_t predicted = 0;  // reserved before its load
  std::uint64_t measured = 0;   // what the load measured (0: its backend's charge is exact)
};

struct device_state {
  device_actor_config config;
  loader_pool_actor pool;
  std::unordered_map<std::string, resident> residents;
  std::unordered_set<std::string> pinned;               // never victims (msg::pin_model)
  std::vector<std::shared_ptr<serving_slot>> draining;  // withdrawn, waiting for leases to end
  bool pool_waiting = false;  // a reservation was refused; tell the pool when anything frees
  std::uint64_t evictions = 0;
  std::uint64_t swaps = 0;            // importance heaps swapped in
  device_metrics* metrics = nullptr;  // this device's entry in config.metrics
  load_penalty penalties;  // measured load times: the penalty the policy is told at each insert
  // Settling reservations that wait for evicted models' bytes to come back (msg::reserve::settle).
  struct waiting_settle {
    msg::reserve request;
    caf::typed_response_promise<msg::reserve_result> promise;
  };
  std::vector<waiting_settle> settling;

  ~device_state() {
    if (config.dev) config.dev->watch(nullptr);
    for (auto& [id, r] : residents)
      r.slot->withdraw();
  }
};

using self_ptr = device_actor::stateful_pointer<device_state>;

// Hit-path uses are counted in the slots; report them to the policy before it chooses, oldest
// first, so that policies ordering by recency see them in the order they happened.
void sync_accesses(device_state& s) {
  struct pending {
    timestamp when;
    const std::string* model;
    std::uint64_t count;
  };
  std::vector<pending> accesses;
  for (auto& [id, r] : s.residents) {
    auto uses = r.slot->uses();
    if (uses != r.seen_uses) {
      accesses.push_back({r.slot->last_used(), &id, uses - r.seen_uses});
      r.seen_uses = uses;
    }
  }
  std::sort(accesses.begin(), accesses.end(),
            [](const pending& a, const pending& b) { return a.when < b.when; });
  for (auto& a : accesses)
    s.config.policy->on_access(*a.model, a.when, a.count);
}

void tell_pool_if_waiting(self_ptr self) {
  if (!self->state.pool_waiting) return;
  self->state.pool_waiting = false;
  self->send(self->state.pool, msg::device_freed{self->state.config.index});
}

// Withdraws a resident model: no new leases; its bytes return when the last one ends.
void withdraw(self_ptr self, const std::string& model, eviction_reason why) {
  auto& s = self->state;
  auto it = s.residents.find(model);
  if (it == s.residents.end()) return;
  auto slot = std::move(it->second.slot);
  if (why == eviction_reason::capacity)
    s.config.metrics->age_at_eviction.observe(
        std::chrono::duration<double>(s.config.time->now() - it->second.installed).count());
  s.residents.erase(it);
  s.metrics->evictions[static_cast<int>(why)].add();
  s.metrics->models_loaded.set(static_cast<std::int64_t>(s.residents.size()));
  s.config.policy->on_remove(model, why == eviction_reason::capacity);
  if (why == eviction_reason::unload)
    s.penalties.forget(model);  // unregistered, or unloaded by hand
  if (!slot->withdraw()) s.draining.push_back(slot);
}

std::uint64_t draining_bytes(const device_state& s) {
  std::uint64_t bytes = 0;
  for (auto& slot : s.draining)
    bytes += slot->bytes();
  return bytes;
}

// Bytes in use beyond the capacity, after the device reported a lower one (0 otherwise): a
// reservation must free these too.
std::uint64_t overcommitted(const device_state& s) {
  auto used = s.config.dev->used(), capacity = s.config.dev->capacity();
  return used > capacity ? used - capacity : 0;
}

// Withdraws `victims` (chosen by the policy) and tells their owners.
void evict(self_ptr self, const std::vector<std::string>& victims) {
  auto& s = self->state;
  for (auto& model : victims) {
    auto owner = s.residents[model].owner;
    auto slot = s.residents[model].slot;
    withdraw(self, model, eviction_reason::capacity);
    ++s.evictions;
    self->send(owner, msg::slot_evicted{std::move(slot), eviction_reason::capacity});
  }
}

// Evicts enough idle models for `bytes` more to fit, counting bytes already draining. Evicts
// nothing when the idle models cannot free enough. `busy` gets the models it passed over because
// an inference was in flight.
void make_room(self_ptr self, const std::string& incoming, std::uint64_t bytes,
               std::vector<std::string>& busy) {
  auto& s = self->state;
  bytes += overcommitted(s);
  auto free = s.config.dev->free();
  auto pending = draining_bytes(s);
  if (free + pending >= bytes) return;
  sync_accesses(s);
  auto pinned = [&](const std::string& model) {
    auto it = s.residents.find(model);
    if (it == s.residents.end() || s.pinned.count(model)) return true;
    if (it->second.slot->in_flight() == 0) return false;
    busy.push_back(model);
    return true;
  };
  auto victims = s.config.policy->choose_victims(incoming, bytes - free - pending, pinned,
                                                 s.config.time->now());
  evict(self, victims);
}

// The device's process died (a model runtime): every resident model went with it. Withdraws them
// (their slots give the bytes back once leases end; the runtime has nothing left to unload), tells
// their owners, and has the pool record a failure for each that lasts until the device is back
// (longer for a model it blames for the crash, among those whose inferences were running).
void lose_models(self_ptr self, const device_event& e) {
  auto& s = self->state;
  msg::models_lost lost{s.config.index, {}, e.reason, e.back_in, {}};
  std::vector<std::pair<std::string, resident>> gone(s.residents.begin(), s.residents.end());
  for (auto& [model, r] : gone) {
    const auto& host_id = r.slot->host_id();
    if (!host_id.empty() &&
        std::find(e.in_flight.begin(), e.in_flight.end(), host_id) != e.in_flight.end())
      lost.in_flight.push_back(model);  // its inference was running when the process died
    withdraw(self, model, eviction_reason::lost);
    self->send(r.owner, msg::slot_evicted{r.slot, eviction_reason::lost});
    lost.models.push_back(model);
  }
  for (auto& w : std::exchange(s.settling, {}))
    w.promise.deliver(msg::reserve_result{nullptr, e.reason});
  self->send(s.pool, std::move(lost));
}

// After a refusal: ask the models make_room passed over as busy for an idle event, so the pool
// hears when one could become a victim. True if one is idle already — its inference may have
// ended between make_room's look and this one, and then no event would come — so the caller
// retries at once.
bool watch_busy_models(device_state& s, const std::vector<std::string>& busy) {
  bool idle_now = false;
  for (auto& model : busy) {
    auto it = s.residents.find(model);
    if (it != s.residents.end() && it->second.slot->notify_when_idle()) idle_now = true;
  }
  return idle_now;
}

// After the device reported a capacity below what its models take (a model runtime resized):
// make_room for nothing, which evicts idle models in the policy's order until those that stay
// fit. Models with inferences in flight that are in the way are asked for an idle event, on
// which this runs again.
void fit_capacity(self_ptr self) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<std::string> busy;
    make_room(self, {}, 0, busy);
    if (!watch_busy_models(self->state, busy))
      return;  // an idle event is on its way, or none is needed
  }
}

msg::reserve_result reserve_bytes(self_ptr self, const msg::reserve& m) {
  auto& s = self->state;
  msg::reserve_result result;
  // A refusal must leave the pool a wake-up: an idle event of a busy model, a draining slot's
  // release, an install, or (when models keep turning idle and busy again between our looks)
  // a retry after a millisecond.
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<std::string> busy;
    make_room(self, m.model, m.bytes, busy);
    auto reserved = s.config.dev->reserve(m.bytes);  // budget only: the loader thread allocates
    if (reserved) {
      result.reservation = std::make_shared<memory_reservation>(std::move(*reserved));
      return result;
    }
    result.error = std::move(reserved).error();
    if (result.error.code != errc::capacity_exhausted) return result;
    s.pool_waiting = true;
    if (!watch_busy_models(s, busy))
      return result;  // an idle event is on its way (or nothing was busy)
  }
  // Every busy model was idle again when asked, and busy again when we tried: no event is
  // pending, so schedule the retry ourselves.
  s.pool_waiting = false;
  self->delayed_send(s.pool, std::chrono::milliseconds(1), msg::device_freed{s.config.index});
  return result;
}

// Whether the bytes draining now would make room for `bytes` once they are back.
bool room_on_its_way(const device_state& s, std::uint64_t bytes) {
  auto free = s.config.dev->free();
  return free + draining_bytes(s) >= bytes + overcommitted(s);
}

// Answers settling reservations whose room has come back (or can no longer come), in arrival
// order. Runs before the pool hears of freed bytes, so a loaded model is never starved by loads
// that have not started.
void retry_settles(self_ptr self) {
  auto& waiting = self->state.settling;
  std::vector<device_state::waiting_settle> still;
  for (auto& w : waiting) {
    auto result = reserve_bytes(self, w.request);
    if (!result.reservation && result.error.code == errc::capacity_exhausted &&
        room_on_its_way(self->state, w.request.bytes))
      still.push_back(std::move(w));
    else
      w.promise.deliver(std::move(result));
  }
  waiting = std::move(still);
}

device_actor::behavior_type device_behavior(self_ptr self,
                                            std::shared_ptr<device_actor_config> config,
                                            loader_pool_actor pool) {
  self->state.config = std::move(*config);
  self->state.pool = std::move(pool);
  auto& cfg = self->state.config;
  if (!cfg.metrics || cfg.metrics->devices.size() <= cfg.index)
    cfg.metrics = std::make_shared<runtime_metrics>(cfg.index + 1);
  self->state.metrics = &cfg.metrics->devices[cfg.index];
  auto weak_self = caf::actor_cast<caf::weak_actor_ptr>(self);
  cfg.dev->watch([weak_self](const device_event& e) {
    if (auto strong = caf::actor_cast<device_actor>(weak_self.lock()))
      caf::anon_send(strong, msg::device_changed{e});
  });
  return {
      [=](msg::reserve& m) -> caf::result<msg::reserve_result> {
        auto result = reserve_bytes(self, m);
        if (result.reservation || !m.settle || result.error.code != errc::capacity_exhausted ||
            !room_on_its_way(self->state, m.bytes))
          return result;
        auto promise = self->make_response_promise<msg::reserve_result>();
        self->state.settling.push_back({m, promise});
        return promise;
      },
      [=](msg::install& m) {
        auto& s = self->state;
        auto& dev = *s.config.dev;
        auto release = [weak_self, model = m.model](serving_slot* slot) {
          return [weak_self, model, slot](serving_slot::event what) {
            if (auto strong = caf::actor_cast<device_actor>(weak_self.lock()))
              caf::anon_send(strong, msg::slot_released{model, slot, what});
          };
        };
        // The slot's callback needs the slot's address: build the slot, then its callback.
        auto measured = (*m.weights)->measured_bytes();
        // A model runtime that died after this load answered took the model with it.
        auto* host = dev.hosted_models();
        bool lost_already = host && !host->holds(**m.weights);
        auto slot = std::make_shared<serving_slot>(m.model, dev, std::move(*m.weights), nullptr);
        slot->set_release(release(slot.get()));
        if (s.residents.count(m.model)) {
          // A newer incarnation of the model (re-registered) replaces a stale copy.
          auto stale = s.residents[m.model];
          withdraw(self, m.model, eviction_reason::replaced);
          self->send(stale.owner, msg::slot_evicted{stale.slot, eviction_reason::replaced});
        }
        s.residents[m.model] =
            resident{slot, m.owner, 0, s.config.time->now(), m.predicted, measured};
        s.metrics->models_loaded.set(static_cast<std::int64_t>(s.residents.size()));
        // The policy weighs the model by what reloading it costs: its mean load time here (an
        // estimate from the device's measured bandwidth while no load of it has been timed).
        s.penalties.record(m.model, slot->bytes(), m.seconds);
        s.config.policy->on_insert(m.model, slot->bytes(), s.penalties.of(m.model, slot->bytes()),
                                   s.config.time->now());
        // Uses already counted by the slot (the waiters' leases) reach the policy at the next sync.
        self->send(m.owner, msg::load_done{dev.name(), slot, m.seconds});
        if (lost_already) {
          withdraw(self, m.model, eviction_reason::lost);
          self->send(m.owner, msg::slot_evicted{slot, eviction_reason::lost});
          self->send(s.pool,
                     msg::models_lost{s.config.index,
                                      {m.model},
                                      make_error(errc::unavailable,
                                                 dev.name() + ": " + m.model +
                                                     " was lost with the runtime that loaded it"),
                                      std::chrono::nanoseconds(0),
                                      {}});
        }
        tell_pool_if_waiting(self);  // a new model may be a victim for a waiting load
      },
      [=](msg::withdraw_slot& m) {
        auto& s = self->state;
        auto it = s.residents.find(m.model);
        if (it != s.residents.end() && it->second.slot == m.slot)
          withdraw(self, m.model, eviction_reason::unload);
        else if (m.slot && !m.slot->withdraw())
          s.draining.push_back(m.slot);
        retry_settles(self);
        tell_pool_if_waiting(self);
      },
      [=](msg::slot_released& m) {
        auto& s = self->state;
        if (m.what == serving_slot::event::quiesced) {
          auto& d = s.draining;
          d.erase(
              std::remove_if(d.begin(), d.end(), [&](auto& slot) { return slot.get() == m.slot; }),
              d.end());
        }
        retry_settles(self);
        fit_capacity(self);
        tell_pool_if_waiting(self);
      },
      [=](msg::device_changed& m) {
        auto& s = self->state;
        switch (m.event.what) {
          case device_event::kind::models_lost:
            lose_models(self, m.event);
            break;
          case device_event::kind::capacity_changed:
            s.config.policy->set_capacity(s.config.dev->capacity());
            fit_capacity(self);
            retry_settles(self);
            break;
          case device_event::kind::ready:
            break;
        }
        // Room, or the device itself, may be back: the pool looks at its queue again.
        s.pool_waiting = false;
        self->send(s.pool, msg::device_freed{s.config.index});
      },
      [=](msg::collect_scores&) -> caf::result<msg::scores_collected> {
        auto& s = self->state;
        auto* rescorer = s.config.policy->rescorer();
        if (!rescorer)
          return to_caf_error(make_error(
              errc::invalid_argument,
              "policy '" + std::string(s.config.policy->name()) + "' keeps no importance scores"));
        sync_accesses(s);
        auto now = s.config.time->now();
        return msg::scores_collected{rescorer->score_inputs(now), rescorer->bias(), now};
      },
      [=](msg::swap_scores& m) {
        if (auto* rescorer = self->state.config.policy->rescorer())
          rescorer->swap_scores(std::move(m.heap));
        ++self->state.swaps;
      },
      [=](msg::pin_model& m) {
        if (m.pinned)
          self->state.pinned.insert(m.model);
        else
          self->state.pinned.erase(m.model);
      },
      [=](msg::inspect_device& m) {
        auto& s = self->state;
        auto now = s.config.time->now();
        device_info info;
        info.name = s.config.dev->name();
        info.policy = std::string(s.config.policy->name());
        info.capacity = s.config.dev->capacity();
        info.used = s.config.dev->used();
        info.draining = draining_bytes(s);
        info.evictions = s.evictions;
        info.score_swaps = s.swaps;
        info.state = s.config.dev->state();
        sync_accesses(s);
        std::size_t ranked_residents = 0;
        for (auto& ranked : s.config.policy->eviction_order(now)) {
          auto it = s.residents.find(ranked.model);
          if (it == s.residents.end()) {
            ++info.untracked;
            continue;
          }
          ++ranked_residents;
          auto& slot = *it->second.slot;
          auto served = slot.served();
          auto idle = served ? std::chrono::duration<double>(now - slot.last_used()).count() : -1;
          info.resident.push_back({ranked.model, slot.bytes(), slot.in_flight(), served, idle,
                                   ranked.score, it->second.predicted, it->second.measured});
        }
        info.untracked += s.residents.size() - ranked_residents;
        m.done(std::move(info));
      },
  };
}

}  // namespace

device_actor spawn_device_actor(caf::actor_system& system, device_actor_config config,
                                loader_pool_actor pool) {
  return system.spawn(device_behavior, std::make_shared<device_actor_config>(std::move(config)),
                      std::move(pool));
}

}  // namespace warm
