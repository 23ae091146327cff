#include "actors/registry_actor.hpp"

#include <caf/all.hpp>

#include <algorithm>

#include "actors/gather.hpp"
#include "actors/model_actor.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "actors/registry_impl.hpp"
#include "actors/registry_writer.hpp"
#include "core/batch_plan.hpp"

namespace warm {

namespace registry_impl {

model_entry* find(registry_state& s, const msg::registration& who) {
  auto it = s.models.find(who.id);
  return it == s.models.end() || it->second.generation != who.generation ? nullptr : &it->second;
}

// Runs `then` with `e`'s model actor, spawned at the first use (after resolving its file).
void with_actor(self_ptr self, model_entry& e, std::function<void(expected<model_actor>)> then) {
  if (e.actor) return then(e.actor);
  when_resolved(
      self, e, [self, who = msg::registration{e.record.id, e.generation}, then](expected<void> r) {
        if (!r)
          return then(r.error().code == errc::unavailable
                          ? r.error()
                          : make_error(errc::load_failed, r.error().message));
        auto& s = self->state;
        auto* e = find(s, who);
        if (!e)
          return then(
              make_error(errc::not_found, "model '" + who.id + "' was unregistered meanwhile"));
        if (!e->actor)
          e->actor = spawn_model_actor(self->system(),
                                       {e->record.id, e->generation, e->file, e->bytes, s.pool,
                                        s.config.routes, s.config.time, s.hub, s.config.offload});
        then(e->actor);
      });
}

void use(self_ptr self, const std::string& model, use_kind kind, timestamp arrival,
         std::function<void(expected<acquired>)> done) {
  auto& s = self->state;
  auto it = s.models.find(model);
  if (it == s.models.end()) {
    if (done) done(unknown(model));
    return;
  }
  once_callback<acquired> answer(std::move(done));
  with_actor(self, it->second, [self, kind, arrival, answer](expected<model_actor> actor) {
    if (!actor) return answer(std::move(actor).error());
    self->send(*actor, msg::client_use{kind, arrival, answer});  // answered to the client directly
  });
}

// A use an actor asked for (msg::ask): requested from the model actor and answered from here, so
// that the answer leaves from the registry's thread (a client's use is answered by the model
// actor directly). The lease is not kept: the asking actor only waits for the load.
void use_asked(self_ptr self, const std::string& model, use_kind kind, timestamp arrival,
               callback<void> done) {
  auto& s = self->state;
  auto it = s.models.find(model);
  if (it == s.models.end()) return done(unknown(model));
  once_callback<void> answer(std::move(done));
  with_actor(self, it->second, [self, kind, arrival, answer](expected<model_actor> actor) {
    if (!actor) return answer(std::move(actor).error());
    self->request(*actor, caf::infinite, msg::model_use{kind, arrival})
        .then([answer](msg::granted&) { answer({}); },
              [answer](caf::error& e) { answer(from_caf_error(e)); });
  });
}

// The callback that answers an actor's request (msg::ask) through its response promise. Every
// request that takes one calls its callback on the registry's thread.
template <class T>
callback<T> answer_to(caf::typed_response_promise<T> promise) {
  return [promise](expected<T> r) mutable {
    if (r)
      promise.deliver(std::move(*r));
    else
      promise.deliver(to_caf_error(r.error()));
  };
}
callback<void> answer_to(caf::typed_response_promise<void> promise) {
  return [promise](expected<void> r) mutable {
    caf::response_promise& p = promise;
    if (r)
      p.deliver(caf::unit);
    else
      p.deliver(to_caf_error(r.error()));
  };
}

// Handles an actor's request `m` as the runtime's edge's message, answering through the promise.
template <class R, class T, class Handle>
caf::result<R> asked(self_ptr self, msg::ask<T>& m, Handle handle) {
  auto promise = self->make_response_promise<R>();
  m.request.done = answer_to(promise);
  handle(m.request);
  return promise;
}

// A page of statuses: ids after `m.after`, at most `m.limit` (0: all).
void on_list(self_ptr self, msg::list_models& m) {
  auto& s = self->state;
  std::vector<std::string> ids;
  for (auto it = s.models.upper_bound(m.after); it != s.models.end(); ++it) {
    if (m.limit && ids.size() >= m.limit) break;
    ids.push_back(it->first);
  }
  statuses(self, ids,
           [done = std::move(m.done)](std::vector<model_status> st) { done(std::move(st)); });
}

// The model a request names: itself, or a vmodel's active model.
const std::string& model_named(const registry_state& s, const std::string& id) {
  auto v = s.vmodels.find(id);
  return v == s.vmodels.end() ? id : v->second.record.active;
}

void on_unload(self_ptr self, msg::unload_model& m) {
  auto& s = self->state;
  auto it = s.models.find(model_named(s, m.id));
  if (it == s.models.end()) return m.done(unknown(m.id));
  if (!it->second.actor) return m.done({});  // never used since registration: nothing is loaded
  once_callback<void> answer(std::move(m.done));
  self->request(it->second.actor, caf::infinite, msg::unload_loaded{})
      .then([answer]() { answer({}); }, [answer](caf::error& e) { answer(from_caf_error(e)); });
}

void on_retry(self_ptr self, msg::retry_model& m) {
  auto& s = self->state;
  auto it = s.models.find(model_named(s, m.id));
  if (it == s.models.end()) return m.done(unknown(m.id));
  if (!it->second.actor) return m.done({});  // never used since registration: nothing failed
  once_callback<void> answer(std::move(m.done));
  self->request(it->second.actor, caf::infinite, msg::forget_failure{})
      .then([answer]() { answer({}); }, [answer](caf::error& e) { answer(from_caf_error(e)); });
}

// Starts loading a vmodel's target: a waiting use requested from the target's model actor; the
// flip happens when it is answered (on_target_ready).
void load_target(self_ptr self, const std::string& vmodel, const std::string& target) {
  auto& s = self->state;
  if (auto v = s.vmodels.find(vmodel); v != s.vmodels.end()) v->second.driving = true;
  auto it = s.models.find(target);
  if (it == s.models.end()) return on_target_ready(self, vmodel, target, unknown(target));
  with_actor(self, it->second, [=](expected<model_actor> actor) {
    if (!actor) {
      if (actor.error().code != errc::unavailable)
        on_target_ready(self, vmodel, target, std::move(actor).error());
      return;
    }
    self->request(*actor, caf::infinite,
                  msg::model_use{use_kind::wait, self->state.config.time->now()})
        .then([=](msg::granted&) { on_target_ready(self, vmodel, target, {}); },
              [=](caf::error& e) { on_target_ready(self, vmodel, target, from_caf_error(e)); });
  });
}

// Models and vmodels together may number at most max_models: each costs a row, memory and (a
// vmodel) a route; capacity_exhausted naming the limit when one more would pass it.
expected<void> check_room(const registry_state& s) {
  if (s.models.size() + s.vmodels.size() + s.registering.size() < s.config.max_models) return {};
  return make_error(errc::capacity_exhausted, "the registry holds its limit of " +
                                                  std::to_string(s.config.max_models) +
                                                  " models and vmodels (--max-models)");
}

void on_register(self_ptr self, msg::register_model& m) {
  auto& s = self->state;
  auto reply = std::move(m.done);
  if (auto ok = check_id(m.id, "model"); !ok) return reply(ok.error());
  if (s.vmodels.count(m.id))
    return reply(make_error(errc::invalid_argument, "'" + m.id + "' is a vmodel id"));
  if (m.info.path.empty()) return reply(make_error(errc::invalid_argument, "model path is empty"));
  if (m.info.batching)
    if (auto why = check_batching(*m.info.batching); !why.empty())
      return reply(make_error(errc::invalid_argument, "model '" + m.id + "': batching: " + why));
  auto then = [self, id = m.id, load_now = m.load_now || m.sync, sync = m.sync,
               reply](expected<void> r) {
    if (!r || !load_now) return reply(r);
    if (!sync) {
      use(self, id, use_kind::proactive, self->state.config.time->now(), nullptr);
      return reply({});
    }
    use(self, id, use_kind::wait, self->state.config.time->now(), [reply](expected<acquired> a) {
      reply(a ? expected<void>{} : expected<void>{std::move(a).error()});
    });
  };
  auto existing = s.models.find(m.id);
  if (existing != s.models.end()) {
    auto& r = existing->second.record;
    if (r.path != m.info.path || r.version != m.info.version || r.size_hint != m.info.size_hint ||
        r.batching != m.info.batching)
      return reply(make_error(
          errc::invalid_argument,
          "model '" + m.id + "' is registered with different info (path '" + r.path + "')"));
    return stage(self, {}, then);  // idempotent: answered with the next commit
  }
  model_record record{m.id, m.info.path, m.info.version, m.info.size_hint, false, m.info.batching};
  if (auto pending = s.registering.find(m.id); pending != s.registering.end()) {
    if (pending->second.record != record)
      return reply(make_error(errc::invalid_argument,
                              "model '" + m.id +
                                  "' is being registered with different info (path '" +
                                  pending->second.record.path + "')"));
    pending->second.then.push_back(std::move(then));  // joins the registration in progress
    return;
  }
  if (auto room = check_room(s); !room) return reply(std::move(room).error());
  auto& pending = s.registering[m.id];
  pending.record = record;
  pending.generation = s.next_generation++;
  pending.then.push_back(std::move(then));
  resolve_then(self, {m.id, pending.generation}, record,
               [self, id = m.id](const auto& r) { registered(self, id, r); });
}

// A registration's file was resolved (or not): the model enters the tables and its record is
// staged, or every request that joined it gets the error.
void registered(self_ptr self, const std::string& id,
                const expected<std::shared_ptr<const model_resolution>>& resolution) {
  auto& s = self->state;
  auto node = s.registering.extract(id);
  if (node.empty()) return;  // stopping: its requests are answered by ~registry_state
  auto& pending = node.mapped();
  if (!resolution) {
    for (auto& then : pending.then)
      then(resolution.error());
    return;
  }
  if (auto taken = s.models.find(id); taken != s.models.end()) {
    // Another instance registered it meanwhile (a shared registry), and this one took it in.
    if (taken->second.record == pending.record)
      return stage(self, {}, [then = std::move(pending.then)](expected<void> r) {
        for (auto& t : then)
          t(r);
      });
    auto differs =
        make_error(errc::invalid_argument,
                   "model '" + id + "' was registered meanwhile with different info (path '" +
                       taken->second.record.path + "')");
    for (auto& then : pending.then)
      then(differs);
    return;
  }
  auto& r = **resolution;
  model_entry e{
      pending.record,    r.file, r.bytes, {}, r.described, resolved_description(r, pending.record),
      pending.generation};
  s.models.emplace(id, std::move(e));
  if (s.config.on_batching) s.config.on_batching(id, pending.record.batching);
  stage(self, {put_model{pending.record}}, [then = std::move(pending.then)](expected<void> r) {
    for (auto& t : then)
      t(r);
  });
}

// A resolution is back from the offload: kept by the entry it was read for (when that
// registration is still current), then passed to whatever waited for it.
void on_model_resolved(self_ptr self, msg::model_resolved& m) {
  auto& s = self->state;
  auto node = s.resolving.extract(m.who.generation);
  if (node.empty()) return;
  if (auto* e = find(s, m.who); e && m.result && e->file.path.empty()) {
    auto& r = **m.result;
    e->file = r.file;
    e->bytes = r.bytes;
    e->io = r.described;
    if (!e->described) e->described = resolved_description(r, e->record);
  }
  for (auto& fn : node.mapped())
    fn(m.result);
}

void on_unregister(self_ptr self, msg::unregister_model& m) {
  auto& s = self->state;
  if (!s.models.count(m.id))
    return m.done(make_error(errc::not_found, "no model '" + m.id + "' is registered"));
  std::string by;
  if (referenced(s, m.id, &by))
    return m.done(make_error(errc::invalid_argument,
                             "model '" + m.id + "' is in use by vmodel '" + by + "'"));
  drop_model(self, m.id);
  stage(self, {erase_model{m.id}}, std::move(m.done));
}

void on_set_vmodel(self_ptr self, msg::set_vmodel& m) {
  auto& s = self->state;
  auto reply = std::move(m.done);
  if (auto ok = check_id(m.id, "vmodel"); !ok) return reply(ok.error());
  if (s.models.count(m.id))
    return reply(make_error(errc::invalid_argument, "'" + m.id + "' is a model id"));
  auto target = s.models.find(m.target);
  if (target == s.models.end())
    return reply(make_error(errc::not_found, "no model '" + m.target + "' is registered"));
  std::vector<registry_change> changes;
  // Marks the target auto-delete once every check has passed: a refused request changes nothing.
  auto mark_target = [&] {
    if (m.auto_delete_target && !target->second.record.auto_delete) {
      target->second.record.auto_delete = true;
      changes.push_back(put_model{target->second.record});
    }
  };
  auto it = s.vmodels.find(m.id);
  bool start_load = false;
  if (it == s.vmodels.end()) {
    if (m.expected_target && !m.expected_target->empty())
      return reply(make_error(
          errc::invalid_argument,
          "vmodel '" + m.id + "' does not exist; expected target '" + *m.expected_target + "'"));
    if (auto room = check_room(s); !room) return reply(std::move(room).error());
    mark_target();
    vmodel_entry v{{m.id, m.target, m.target}, vmodel_state::defined, {}};
    s.vmodels.emplace(m.id, v);
    s.config.routes->put_alias(m.id, m.target);
    changes.push_back(put_vmodel{v.record});
    use(self, m.target, use_kind::proactive, s.config.time->now(), nullptr);
  } else {
    auto& v = it->second;
    if (m.expected_target && *m.expected_target != v.record.target)
      return reply(make_error(errc::invalid_argument,
                              "vmodel '" + m.id + "' targets '" + v.record.target +
                                  "', not the expected '" + *m.expected_target + "'"));
    mark_target();
    if (v.record.target != m.target || v.state == vmodel_state::transition_failed ||
        (v.state == vmodel_state::transitioning && !v.driving)) {
      auto previous_target = v.record.target;
      v.record.target = m.target;
      v.error.reset();
      v.state = v.record.active == m.target ? vmodel_state::defined : vmodel_state::transitioning;
      changes.push_back(put_vmodel{v.record});
      start_load = v.state == vmodel_state::transitioning;
      auto orphans = collect_orphans(self, {previous_target});
      changes.insert(changes.end(), orphans.begin(), orphans.end());
    }
  }
  auto id = m.id;
  stage(self, std::move(changes),
        [self, id, start_load, target = m.target, reply](expected<void> r) {
          if (!r) return reply(std::move(r).error());
          if (start_load) load_target(self, id, target);
          vmodel_status_of(self, id, reply);
        });
}

// A vmodel's target answered its waiting use (`result`): flip the alias, or TRANSITION_FAILED.
void on_target_ready(self_ptr self, const std::string& vmodel, const std::string& target,
                     expected<void> result) {
  auto& s = self->state;
  auto it = s.vmodels.find(vmodel);
  if (it == s.vmodels.end() || it->second.record.target != target ||
      it->second.state != vmodel_state::transitioning)
    return;  // superseded by a later setVModel or deleted
  auto& v = it->second;
  if (!result) {
    v.state = vmodel_state::transition_failed;
    v.error = result.error();
    return;
  }
  auto previous = v.record.active;
  v.record.active = target;
  v.state = vmodel_state::defined;
  s.config.routes->put_alias(vmodel, target);
  std::vector<registry_change> changes{put_vmodel{v.record}};
  auto orphans = collect_orphans(self, {previous});
  changes.insert(changes.end(), orphans.begin(), orphans.end());
  stage(self, std::move(changes), [](expected<void>) {});
}

void on_delete_vmodel(self_ptr self, msg::delete_vmodel& m) {
  auto& s = self->state;
  auto it = s.vmodels.find(m.id);
  if (it == s.vmodels.end()) return m.done(make_error(errc::not_found, "no vmodel '" + m.id + "'"));
  auto record = it->second.record;
  s.vmodels.erase(it);
  s.config.routes->erase_alias(m.id);
  std::vector<registry_change> changes{erase_vmodel{m.id}};
  auto orphans = collect_orphans(self, {record.active, record.target});
  changes.insert(changes.end(), orphans.begin(), orphans.end());
  stage(self, std::move(changes), std::move(m.done));
}

}  // namespace registry_impl

namespace {

using namespace registry_impl;

registry_actor::behavior_type registry_behavior(self_ptr self,
                                                std::shared_ptr<registry_config> config,
                                                registry_writer_actor writer) {
  auto& s = self->state;
  s.config = std::move(*config);
  s.pool = std::move(s.config.pool);
  s.hub = std::move(s.config.hub);
  s.writer = std::move(writer);
  if (s.config.initial) {
    take_in(self, std::move(*s.config.initial));
    s.config.initial.reset();
  }
  publish_counts(s);
  return {
      [=](msg::register_model& m) { on_register(self, m); },
      [=](msg::unregister_model& m) { on_unregister(self, m); },
      [=](msg::use_model& m) {
        use(self, model_named(self->state, m.target), m.kind, m.arrival, std::move(m.done));
      },
      [=](msg::unload_model& m) { on_unload(self, m); },
      [=](msg::retry_model& m) { on_retry(self, m); },
      [=](msg::describe_model& m) { on_describe(self, m); },
      [=](msg::get_status& m) {
        statuses(self, {m.id}, [done = std::move(m.done)](std::vector<model_status> st) {
          done(std::move(st[0]));
        });
      },
      [=](msg::list_models& m) { on_list(self, m); },
      [=](msg::set_vmodel& m) { on_set_vmodel(self, m); },
      [=](msg::delete_vmodel& m) { on_delete_vmodel(self, m); },
      [=](msg::get_vmodel_status& m) { vmodel_status_of(self, m.id, std::move(m.done)); },
      [=](msg::inspect_models& m) {
        auto& s = self->state;
        std::vector<std::string> ids;
        for (auto& [id, e] : s.models)
          if (e.actor) ids.push_back(id);
        auto registered = s.models.size(), vmodels = s.vmodels.size();
        statuses(self, ids,
                 [done = std::move(m.done), registered, vmodels](std::vector<model_status> st) {
                   done(std::move(st), registered, vmodels);
                 });
      },
      [=](msg::model_sources& m) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& [id, e] : self->state.models)
          if (!e.file.source.empty() &&
              std::binary_search(m.sources.begin(), m.sources.end(), e.file.source))
            out.emplace_back(id, e.file.source);
        m.done(std::move(out));
      },
      [=](msg::flush_registry&) { flush(self); },
      [=](msg::description_read& m) { on_description_read(self, m); },
      [=](msg::model_resolved& m) { on_model_resolved(self, m); },
      [=](msg::store_update& m) { on_store_update(self, m); },
      [=](msg::ask<msg::register_model>& m) -> caf::result<void> {
        if (m.request.sync)
          return to_caf_error(make_error(errc::invalid_argument,
                                         "an actor's registration cannot be sync: ask for a use"));
        return asked<void>(self, m, [self](msg::register_model& r) { on_register(self, r); });
      },
      [=](msg::ask<msg::unregister_model>& m) {
        return asked<void>(self, m, [self](msg::unregister_model& r) { on_unregister(self, r); });
      },
      [=](msg::ask<msg::use_model>& m) -> caf::result<void> {
        auto promise = self->make_response_promise<void>();
        auto& u = m.request;
        use_asked(self, model_named(self->state, u.target), u.kind, u.arrival, answer_to(promise));
        return promise;
      },
      [=](msg::ask<msg::retry_model>& m) {
        return asked<void>(self, m, [self](msg::retry_model& r) { on_retry(self, r); });
      },
      [=](msg::ask<msg::list_models>& m) {
        return asked<std::vector<model_status>>(self, m,
                                                [self](msg::list_models& r) { on_list(self, r); });
      },
      [=](msg::ask<msg::set_vmodel>& m) {
        return asked<vmodel_status>(self, m,
                                    [self](msg::set_vmodel& r) { on_set_vmodel(self, r); });
      },
      [=](msg::ask<msg::delete_vmodel>& m) {
        return asked<void>(self, m, [self](msg::delete_vmodel& r) { on_delete_vmodel(self, r); });
      },
      [=](msg::ask<msg::get_vmodel_status>& m) {
        return asked<vmodel_status>(self, m, [self](msg::get_vmodel_status& r) {
          vmodel_status_of(self, r.id, std::move(r.done));
        });
      },
  };
}

}  // namespace

registry_actor spawn_registry(caf::actor_system& system, registry_config config) {
  if (!config.initial)
    if (auto stored = config.store->load()) config.initial = std::move(*stored);
  const auto since = config.initial ? config.initial->revision : 0;
  auto* store = config.store.get();  // owned by the writer until it stops, after the registry
  auto writer = spawn_registry_writer(system, std::move(config.store));
  auto registry = system.spawn<caf::detached>(
      registry_behavior, std::make_shared<registry_config>(std::move(config)), std::move(writer));
  store->follow(
      since, [weak = caf::actor_cast<caf::weak_actor_ptr>(registry)](registry_update update) {
        if (auto target = caf::actor_cast<registry_actor>(weak.lock()))
          caf::anon_send(target, msg::store_update{
                                     std::make_shared<const registry_update>(std::move(update))});
      });
  return registry;
}

}  // namespace warm
