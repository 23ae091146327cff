#include "cluster/placer.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include "cluster/etcd_registry.hpp"
#include "cluster/membership.hpp"
#include "cluster/peers.hpp"
#include "warm/runtime.hpp"

namespace warm::cluster {
namespace {

struct job {
  infer_request request;
  once_callback<infer_result> done;
  bool retried = false;  // already sent back once by an instance whose load failed
};

struct placer_state {
  placer_config config;
  std::unique_ptr<placement_claims> claims;
  throttled_log warn;
  std::map<std::string, std::vector<job>> queued;  // by model, until decide_queued
  std::vector<known_failure> local_failures;  // seen here (own loads, peers' answers), not expired
  bool draining = false;
  std::uint64_t watch = 0;  // the runtime's events
  bool watching = false;
};

using self_pointer = placer_actor::stateful_pointer<placer_state>;

void serve_here(placer_state& s, std::vector<job> jobs) {
  for (auto& j : jobs) {
    j.request.forwarded = true;  // loaded here; the miss handler does not see it again
    s.config.rt->infer(std::move(j.request), j.done);
  }
}

// Queues `j` for the next decision; the first job queued asks for one.
void enqueue(self_pointer self, const std::string& model, job j) {
  auto& s = self->state;
  if (s.queued.empty()) self->send(self, msg::decide_queued{});
  s.queued[model].push_back(std::move(j));
}

std::int64_t lease_of(const placer_state& s) {
  return s.config.members->status().lease;
}

// The model's status here, within 2 s (this thread may wait; it is not a scheduler's).
expected<model_status> status_of(placer_state& s, const std::string& model) {
  auto answer = s.config.rt->status(model);
  if (answer.wait_for(std::chrono::seconds(2)) != std::future_status::ready)
    return make_error(errc::timeout, "the runtime did not answer a status request within 2 s");
  return answer.get();
}

// Forgets failures past their life.
void expire_failures(placer_state& s) {
  const auto now = now_unix_ms();
  auto& f = s.local_failures;
  f.erase(std::remove_if(f.begin(), f.end(),
                         [&](const auto& x) { return now - x.failed_unix_ms >= failure_life_ms; }),
          f.end());
}

// What placing `model` (of this status here) starts from; place() reads the rest from etcd.
placement_inputs inputs_for(const placer_state& s, const std::string& model,
                            const model_status& status, membership_status& membership) {
  placement_inputs in;
  in.members = members_now(membership, s.draining);
  in.model = model;
  in.request.bytes = status.bytes;
  in.request.load_seconds = status.loads.count > 0 ? status.loads.mean_ms / 1000 : 1.0;
  in.claim_life_ms = s.config.claims.claim_life.count();
  return in;
}

// Sends the jobs to `instance`, which placement chose to load the model. When its load fails
// there, each job comes back (once) to be placed again without that instance.
void forward(self_pointer self, const std::string& model, const std::string& instance,
             const std::string& address, std::vector<job> jobs) {
  auto& s = self->state;
  for (auto& j : jobs) {
    if (j.retried) {
      s.config.peers->infer(address, std::move(j.request), j.done);
      continue;
    }
    auto again = j.request;  // a copy, for the retry
    s.config.peers->infer(
        address, std::move(j.request),
        [placer = caf::actor_cast<placer_actor>(self), model, instance, again = std::move(again),
         done = std::move(j.done)](expected<infer_result> r) mutable {
          if (r || !instance_failure(r.error().code)) return done(std::move(r));
          auto why = r.error();
          // Answered with the peer's error should the placer be gone.
          once_callback<infer_result> back([done](expected<infer_result> x) { done(std::move(x)); },
                                           why);
          caf::anon_send(placer, msg::refused_by_peer{model, instance, why, std::move(again),
                                                      std::move(back)});
        });
  }
}

void decide(self_pointer self, const std::string& model, std::vector<job> jobs) {
  auto& s = self->state;
  expire_failures(s);
  auto status = status_of(s, model);
  if (status && status->state == model_state::loading_failed)  // placed elsewhere, if anywhere
    s.local_failures.push_back({model, s.config.claims.instance, now_unix_ms()});
  // Not registered, or already loading here: this instance answers as it would alone.
  if (!status ||
      (status->state != model_state::not_loaded && status->state != model_state::loading_failed))
    return serve_here(s, std::move(jobs));
  auto membership = s.config.members->status();
  auto in = inputs_for(s, model, *status, membership);
  auto d = s.claims->place(in, membership.lease, s.local_failures);
  if (!d) {
    s.warn("placement: cannot place " + model +
           " through etcd, serving it here: " + d.error().to_string());
    return serve_here(s, std::move(jobs));
  }
  using action = placement_decision::action;
  if (d->what == action::serve_here || (d->what == action::claim && d->self))
    return serve_here(s, std::move(jobs));
  forward(self, model, d->instance, d->address, std::move(jobs));
}

// Whether this instance takes over what an instance that went left: the live instance with the
// lowest name that is not draining (claims would keep a model one load anyway; this keeps it one
// placement).
bool adopter(const placer_state& s) {
  if (s.draining) return false;
  for (const auto& m : s.config.members->members())
    if (!m.record.draining) return m.self;
  return false;
}

// A hot model of an instance that went, loaded where placement says unless a live instance holds
// or loads it already.
void adopt(placer_state& s, const std::string& model) {
  auto membership = s.config.members->status();
  for (const auto& m : membership.members)
    if (!m.record.draining && (m.record.holds(model) || m.record.is_loading(model))) return;
  auto status = status_of(s, model);
  if (!status ||
      (status->state != model_state::not_loaded && status->state != model_state::loading_failed))
    return;
  expire_failures(s);
  auto in = inputs_for(s, model, *status, membership);
  auto d = s.claims->place(in, membership.lease, s.local_failures);
  if (!d)
    return s.warn("placement: cannot place " + model +
                  " (its instance went) through etcd: " + d.error().to_string());
  if (d->what != placement_decision::action::claim) return;  // another instance adopted it first
  ++s.config.claims.counters->adopted;
  auto logged = [log = s.config.log, model, to = d->instance](expected<void> r) {
    if (!r && log)
      log("placement: loading " + model + " (its instance went) on " + to +
          " failed: " + r.error().to_string());
  };
  if (d->self)
    s.config.rt->ensure_loaded(model, false, std::move(logged));
  else
    s.config.peers->ensure(d->address, model, std::move(logged));
}

// vmodels whose transition is pending in the cluster's registry (active ≠ target): the instance
// that set one may be the one that went. Set here again (compared against the same target), so
// that this instance loads the target and flips; when the setter is alive, both flip to the same
// target.
void resume_transitions(placer_state& s) {
  const auto prefix = registry_prefix(s.config.claims.root);
  auto listed = s.config.claims.store->get_prefix(prefix + "vmodels/");
  if (!listed)
    return s.warn("placement: cannot read the vmodels to resume their transitions: " +
                  listed.error().to_string());
  for (const auto& kv : listed->kvs) {
    auto change = decode_change(prefix, kv.key, kv.value);
    const auto* v = change ? std::get_if<put_vmodel>(&*change) : nullptr;
    if (!v || v->record.active == v->record.target) continue;
    ++s.config.claims.counters->transitions_resumed;
    s.config.rt->set_vmodel(v->record.id, v->record.target, false, v->record.target,
                            [log = s.config.log, id = v->record.id](expected<vmodel_status> r) {
                              if (!r && log)
                                log("placement: cannot resume the transition of vmodel " + id +
                                    ": " + r.error().to_string());
                            });
  }
}

void stop_watching(placer_state& s) {
  if (s.watching) s.config.rt->unwatch(s.watch);
  s.watching = false;
}

placer_actor::behavior_type placer(self_pointer self, std::shared_ptr<placer_config> config,
                                   std::shared_ptr<std::promise<void>> watching) {
  auto& s = self->state;
  s.config = std::move(*config);
  s.warn = throttled_log(s.config.log);
  s.claims = claims_warning_to(s.config.claims, s.warn);
  // Loads that fail here are recorded for the other instances.
  s.watch =
      s.config.rt->watch([placer = caf::actor_cast<placer_actor>(self)](const model_event& e) {
        if (e.state == model_state::loading_failed && e.error)
          caf::anon_send(placer, msg::load_failed_here{e.model, *e.error});
      });
  s.watching = true;
  watching->set_value();
  return {
      [=](msg::place_miss& m) {
        enqueue(self, m.model, job{std::move(m.request), m.done});
      },
      [=](msg::decide_queued) {
        auto batch = std::move(self->state.queued);
        self->state.queued.clear();
        for (auto& [model, jobs] : batch)
          decide(self, model, std::move(jobs));
      },
      [=](msg::load_failed_here& m) {
        auto& st = self->state;
        st.claims->record_failure(m.model, st.config.claims.instance, m.why, lease_of(st));
      },
      [=](msg::refused_by_peer& m) {
        auto& st = self->state;
        st.local_failures.push_back({m.model, m.instance, now_unix_ms()});
        st.claims->record_failure(m.model, m.instance, m.why, lease_of(st));
        enqueue(self, m.model, job{std::move(m.request), m.done, true});
      },
      [=](msg::instance_gone& m) {
        auto& st = self->state;
        if (!adopter(st)) return;
        for (const auto& model : m.hot)
          adopt(st, model);
        resume_transitions(st);
      },
      [=](msg::start_draining) { self->state.draining = true; },
      [=](msg::stop_placing) {
        auto& st = self->state;
        stop_watching(st);
        auto rest = std::move(st.queued);
        st.queued.clear();
        for (auto& [model, jobs] : rest)
          serve_here(st, std::move(jobs));
        self->quit();
      },
  };
}

}  // namespace

expected<placer_actor> spawn_placer(caf::actor_system& system, placer_config config) {
  if (!config.claims.store || !config.claims.counters || !config.rt || !config.members ||
      !config.peers)
    return make_error(errc::invalid_argument,
                      "placement needs etcd, counters, the runtime, the members and the peers");
  // Detached: it waits on etcd and on the runtime's answers. Its first act, on its own thread, is
  // to watch the runtime's events: returned once it does, so no failed load goes unrecorded.
  auto watching = std::make_shared<std::promise<void>>();
  auto watched = watching->get_future();
  auto spawned = system.spawn<caf::detached>(
      placer, std::make_shared<placer_config>(std::move(config)), std::move(watching));
  watched.wait();
  return spawned;
}

}  // namespace warm::cluster
