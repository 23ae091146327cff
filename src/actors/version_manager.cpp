#include "actors/version_manager.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/version_manager_protocol.hpp"
#include "core/version_rules.hpp"
#include "core/version_settler.hpp"
#include "sources/object_url.hpp"

namespace warm {
namespace {

struct version_entry {
  version_state state = version_state::new_;
  bool aspired = false;
  bool present = false;  // settled at the last look
  bool kept = false;     // its unload was refused (an alias someone else owns names it): kept until
                         // the next look
  bool registered = false;  // loading: its registration is in place (a forced label may name it)
  std::string error;
  std::uint32_t failures = 0;
  timestamp retry_at{};
};

struct alias_entry {
  std::optional<std::uint64_t> target;  // the version the vmodel names now; none: no vmodel
  bool busy = false;                    // a change is in flight
  std::string error;                    // why the last change failed (retried at the next look)
};

struct served_entry {
  served_model_config config;
  std::uint64_t generation = 0;
  version_settler settler;
  std::map<std::uint64_t, version_entry> versions;
  std::map<std::string, alias_entry> aliases;  // by vmodel id: the name, and name@label
  std::uint32_t adopting = 0;             // registry answers still awaited before the first step
  bool looked = false;                    // a look has been taken in
  bool looking = false;                   // a look is on the offload
  bool look_again = false;                // asked for a look while one was on the offload
  bool removing = false;                  // no longer configured: everything goes, then the entry
  std::optional<std::uint64_t> evicting;  // an unload waits for the default alias to leave it
  std::optional<std::uint64_t> pinned;    // the version pinned on the devices while another loads
  std::string source_error;
  // Its last look listed a remote store (before the first: it may), so the next runs on
  // offload_remote.
  bool remote = true;
  explicit served_entry(std::chrono::nanoseconds settle) : settler(settle) {}
};

struct manager_state {
  version_manager_config config;
  std::map<std::string, served_entry> models;
  std::uint64_t next_generation = 1;
};

using self_ptr = version_manager_actor::stateful_pointer<manager_state>;

const std::string& base_of(const served_model_config& c) {
  return c.base_path.empty() ? c.name : c.base_path;
}

version_manager_actor handle(self_ptr self) {
  return caf::actor_cast<version_manager_actor>(self);
}

served_entry* find(self_ptr self, const std::string& model, std::uint64_t generation) {
  auto it = self->state.models.find(model);
  if (it == self->state.models.end() || it->second.generation != generation) return nullptr;
  return &it->second;
}

// Asks the registry `m` on behalf of served model `e` (a request, msg::ask); its answer (an R, or
// the error) is handed to `then` with the model's entry, on this actor, if the entry is still the
// one that asked (not removed and served anew meanwhile).
template <class R, class Message, class Then>
void ask_registry(self_ptr self, const served_entry& e, Message m, Then then) {
  auto answer = [self, model = e.config.name, generation = e.generation,
                 then](expected<R> r) mutable {
    if (auto* entry = find(self, model, generation)) then(*entry, std::move(r));
  };
  auto request =
      self->request(self->state.config.registry, caf::infinite, msg::ask<Message>{std::move(m)});
  auto failed = [answer](caf::error& err) mutable { answer(from_caf_error(err)); };
  if constexpr (std::is_void_v<R>)
    request.then([answer]() mutable { answer({}); }, failed);
  else
    request.then([answer](R& r) mutable { answer(std::move(r)); }, failed);
}

std::vector<version_snapshot> snapshots(const served_entry& e) {
  std::vector<version_snapshot> out;
  for (auto& [v, entry] : e.versions)
    out.push_back({v, entry.state, entry.aspired || entry.kept});
  return out;
}

// Which versions are aspired: those present that the policy selects, and those a label names.
void reaspire(served_entry& e) {
  std::vector<std::uint64_t> present;
  for (auto& [v, entry] : e.versions)
    if (entry.present) present.push_back(v);
  auto chosen = select_versions(e.config.versions, present);
  std::set<std::uint64_t> aspired(chosen.begin(), chosen.end());
  for (auto& [label, v] : e.config.labels)
    if (auto it = e.versions.find(v); it != e.versions.end() && it->second.present)
      aspired.insert(v);
  for (auto& [v, entry] : e.versions)
    entry.aspired = !e.removing && aspired.count(v) > 0;
  // A version that is neither aspired nor registered needs nothing more.
  for (auto it = e.versions.begin(); it != e.versions.end();) {
    bool unregistered =
        it->second.state == version_state::new_ || it->second.state == version_state::error;
    it = !it->second.aspired && unregistered ? e.versions.erase(it) : std::next(it);
  }
}

void step(self_ptr self, served_entry& e);
void after_event(self_ptr self, served_entry& e);

// Looks at the model's directory on the offload (not before what a previous run left is adopted:
// a look decides which of those versions stay).
void look(self_ptr self, served_entry& e) {
  if (e.removing || e.adopting > 0) return;
  if (e.looking) {
    e.look_again = true;
    return;
  }
  e.looking = true;
  auto& c = self->state.config;
  // A look that may list a remote store runs where a slow store holds no local look back.
  const bool may_list = c.look_remote && (sources::is_remote(base_of(e.config)) || e.remote);
  auto& run = may_list && c.offload_remote ? c.offload_remote : c.offload;
  run([repository = c.repository, time = c.time, watcher = c.watcher, target = handle(self),
       look_remote = c.look_remote, model = e.config.name, generation = e.generation,
       base = base_of(e.config)] {
    const bool remote = sources::is_remote(base);
    if (watcher && !remote)
      if (auto dir = repository->find_directory(base)) watcher->watch(model, *dir);
    msg::versions_seen seen;
    seen.model = model;
    seen.generation = generation;
    seen.look = !remote       ? repository->look_at_versions(base)
                : look_remote ? look_remote(base)
                              : invalid_input("'" + base + "': remote sources are not configured");
    seen.remote = remote;
    // A directory no local root holds may be in a remote one (as a registration is resolved).
    if (!remote && !seen.look && seen.look.error().code == errc::not_found && look_remote) {
      seen.remote = true;
      if (auto found = look_remote(base); found || found.error().code != errc::not_found)
        seen.look = std::move(found);
    }
    seen.now = time->now().time_since_epoch();
    seen.wall_now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    caf::anon_send(target, std::move(seen));
  });
}

// The registry's answer about vmodel `alias` (moved to `target`, or deleted when there is none;
// or where it is, when `check`).
void on_alias(self_ptr self, served_entry& e, const std::string& alias,
              std::optional<std::uint64_t> target, bool check, expected<vmodel_status> r) {
  auto& a = e.aliases[alias];
  if (check && e.adopting > 0 && !a.busy) {
    // Adoption: where a previous run left the alias (not_found: it has none).
    --e.adopting;
    auto prefix = e.config.name + "@";
    if (r && r->active.rfind(prefix, 0) == 0)
      a.target = parse_version(r->active.substr(prefix.size()));
    return after_event(self, e);
  }
  if (!target) {  // a delete (not_found: it was gone already)
    a.busy = false;
    if (r || r.error().code == errc::not_found)
      a.target.reset();
    else
      a.error = r.error().message;
    return after_event(self, e);
  }
  if (!r) {
    a.busy = false;
    a.error = r.error().message;
    return after_event(self, e);
  }
  if (r->state == vmodel_state::transitioning) {
    // It flips once its target answers a use (the target is ready, so soon): ask again shortly.
    self->delayed_send(handle(self), std::chrono::milliseconds(5),
                       msg::recheck_alias{e.config.name, e.generation, alias, target});
    return;
  }
  a.busy = false;
  if (r->state == vmodel_state::defined && r->active == version_id(e.config.name, *target)) {
    if (alias == e.config.name && a.target != target && self->state.config.metrics)
      self->state.config.metrics->version_rolls.add();
    a.target = target;
  } else {
    a.error = r->error ? r->error->message
                       : "vmodel did not move to " + version_id(e.config.name, *target);
  }
  after_event(self, e);
}

// Points vmodel `alias` at `version` (none: deletes it).
void move_alias(self_ptr self, served_entry& e, const std::string& alias,
                std::optional<std::uint64_t> version) {
  e.aliases[alias].busy = true;
  if (!version) {
    ask_registry<void>(
        self, e, msg::delete_vmodel{alias, {}}, [self, alias](served_entry& e, expected<void> r) {
          on_alias(
              self, e, alias, std::nullopt, false,
              r ? expected<vmodel_status>{vmodel_status{}} : expected<vmodel_status>{r.error()});
        });
    return;
  }
  ask_registry<vmodel_status>(
      self, e, msg::set_vmodel{alias, version_id(e.config.name, *version), false, std::nullopt, {}},
      [self, alias, version](served_entry& e, expected<vmodel_status> r) {
        on_alias(self, e, alias, version, false, std::move(r));
      });
}

// Asks the registry where vmodel `alias` is now.
void check_alias(self_ptr self, served_entry& e, const std::string& alias,
                 std::optional<std::uint64_t> version) {
  ask_registry<vmodel_status>(self, e, msg::get_vmodel_status{alias, {}},
                              [self, alias, version](served_entry& e, expected<vmodel_status> r) {
                                on_alias(self, e, alias, version, true, std::move(r));
                              });
}

// Moves the aliases that are not where they should be (one change in flight per alias).
void update_aliases(self_ptr self, served_entry& e) {
  auto snaps = snapshots(e);
  std::vector<version_snapshot> serving;
  for (auto& s : snaps)
    if (!e.evicting || s.version != *e.evicting) serving.push_back(s);
  std::map<std::string, std::optional<std::uint64_t>> desired;
  desired[e.config.name] = e.removing ? std::nullopt : default_version(serving);
  if (!e.removing)
    for (auto& [label, v] : e.config.labels) {
      auto id = label_id(e.config.name, label);
      auto it = e.versions.find(v);
      auto state = it != e.versions.end() ? it->second.state : version_state::new_;
      // A label moves only to a ready version (forced: to one being loaded); until then it stays
      // where it was.
      bool movable =
          state == version_state::ready ||
          (e.config.force_labels && state == version_state::loading && it->second.registered);
      desired[id] = movable ? std::optional<std::uint64_t>(v) : e.aliases[id].target;
    }
  for (auto& [alias, a] : e.aliases)
    if (!desired.count(alias)) desired[alias] = std::nullopt;
  for (auto& [alias, want] : desired) {
    auto& a = e.aliases[alias];
    if (a.busy || a.target == want || !a.error.empty()) continue;
    move_alias(self, e, alias, want);
  }
}

bool alias_names(const served_entry& e, std::uint64_t version) {
  for (auto& [id, a] : e.aliases)
    if (a.target == version || a.busy) return true;
  return false;
}

std::chrono::nanoseconds back_off(const version_manager_config& c, std::uint32_t failures) {
  auto delay = c.retry_min;
  for (std::uint32_t i = 1; i < failures && delay < c.retry_max; ++i)
    delay *= 2;
  return std::min(delay, c.retry_max);
}

void use_version(self_ptr self, served_entry& e, std::uint64_t version);
void failed_load(self_ptr self, served_entry& e, std::uint64_t version, const warm::error& error);

void start_load(self_ptr self, served_entry& e, std::uint64_t version) {
  auto& v = e.versions[version];
  v.state = version_state::loading;
  v.registered = false;
  model_info info(base_of(e.config), version, e.config.size_hint);
  info.batching = e.config.batching;
  // A registration a failed load left behind (a forced label held it) loads again at once: its
  // failure record is forgotten first (the registry takes requests in order).
  if (v.failures > 0)
    self->send(self->state.config.registry,
               msg::retry_model{version_id(e.config.name, version), [](expected<void>) {}});
  ask_registry<void>(
      self, e,
      msg::register_model{version_id(e.config.name, version), std::move(info), false, false, {}},
      [self, version](served_entry& e, expected<void> r) {
        auto it = e.versions.find(version);
        if (it != e.versions.end()) {
          if (r) {
            it->second.registered = true;
            use_version(self, e, version);
          } else {
            failed_load(self, e, version, r.error());
          }
        }
        after_event(self, e);
      });
}

// The version is registered: use it, waiting for its load.
void use_version(self_ptr self, served_entry& e, std::uint64_t version) {
  msg::use_model use{version_id(e.config.name, version), use_kind::wait,
                     self->state.config.time->now(), nullptr};
  ask_registry<void>(self, e, std::move(use), [self, version](served_entry& e, expected<void> r) {
    auto it = e.versions.find(version);
    if (it != e.versions.end()) {
      if (r) {
        it->second.state = version_state::ready;
        it->second.failures = 0;
        it->second.error.clear();
      } else {
        failed_load(self, e, version, r.error());
      }
    }
    after_event(self, e);
  });
}

// A version's registration or load failed: it is retried after a back-off, registered anew (a
// failure record would otherwise keep it from loading until it expires).
void failed_load(self_ptr self, served_entry& e, std::uint64_t version, const warm::error& error) {
  auto& v = e.versions[version];
  v.state = version_state::error;
  v.error = error.message;
  ++v.failures;
  auto& c = self->state.config;
  if (c.metrics) c.metrics->version_load_failures.add();
  auto delay = back_off(c, v.failures);
  v.retry_at = c.time->now() + delay;
  self->send(c.registry,
             msg::unregister_model{version_id(e.config.name, version), [](expected<void>) {}});
  self->delayed_send(handle(self), delay, msg::retry_versions{e.config.name, e.generation});
  reaspire(e);
}

void start_unload(self_ptr self, served_entry& e, std::uint64_t version) {
  e.versions[version].state = version_state::unloading;
  ask_registry<void>(self, e, msg::unregister_model{version_id(e.config.name, version), {}},
                     [self, version](served_entry& e, expected<void> r) {
                       auto it = e.versions.find(version);
                       if (it != e.versions.end()) {
                         if (r || r.error().code == errc::not_found) {
                           e.versions.erase(it);
                         } else {
                           it->second.state = version_state::ready;
                           it->second.kept = true;
                           it->second.error = "cannot unload: " + r.error().message;
                         }
                       }
                       after_event(self, e);
                     });
}

// Takes every step the rules allow now.
void step(self_ptr self, served_entry& e) {
  if (e.adopting > 0 || !e.looked) return;
  auto now = self->state.config.time->now();
  for (auto& [v, entry] : e.versions)
    if (entry.state == version_state::error && entry.aspired && entry.retry_at <= now)
      entry.state = version_state::new_;
  for (int guard = 0; guard < 1000; ++guard) {
    update_aliases(self, e);
    auto action = next_version_action(e.config.loading, snapshots(e));
    if (!action) break;
    if (action->what == version_action::kind::load) {
      start_load(self, e, action->version);
      continue;
    }
    if (alias_names(e, action->version)) {
      // The default alias moves off it first (for a resource-preserving roll: is deleted).
      bool moving = e.evicting != action->version;
      e.evicting = action->version;
      if (moving) continue;
      break;
    }
    e.evicting.reset();
    start_unload(self, e, action->version);
  }
}

// Whether a removed model is gone entirely (its entry may then be erased).
bool finished(const served_entry& e) {
  if (!e.removing || !e.versions.empty()) return false;
  for (auto& [id, a] : e.aliases)
    if (a.busy || a.target) return false;
  return true;
}

// Pins the default version while any version loads (a roll), and unpins it after.
void update_pin(self_ptr self, served_entry& e) {
  bool loading = std::any_of(e.versions.begin(), e.versions.end(),
                             [](auto& v) { return v.second.state == version_state::loading; });
  auto& name = e.config.name;
  std::optional<std::uint64_t> want;
  if (loading && !e.removing)
    if (auto it = e.aliases.find(name); it != e.aliases.end()) want = it->second.target;
  if (want == e.pinned) return;
  for (auto& device : self->state.config.devices) {
    if (e.pinned) self->send(device, msg::pin_model{version_id(name, *e.pinned), false});
    if (want) self->send(device, msg::pin_model{version_id(name, *want), true});
  }
  e.pinned = want;
}

void after_event(self_ptr self, served_entry& e) {
  if (e.adopting == 0 && !e.looked) look(self, e);
  step(self, e);
  update_pin(self, e);
  if (finished(e)) self->state.models.erase(e.config.name);
}

void on_seen(self_ptr self, msg::versions_seen& m) {
  auto* e = find(self, m.model, m.generation);
  if (!e) return;
  e->looking = false;
  e->remote = m.remote;
  if (std::exchange(e->look_again, false)) look(self, *e);
  if (!m.look) {
    // The directory cannot be read now: what is served stays as it is.
    e->source_error = m.look.error().message;
    if (auto& metrics = self->state.config.metrics) metrics->version_source_errors.add();
    return;
  }
  e->source_error.clear();
  e->looked = true;
  auto settled = e->settler.take(*m.look, m.now, m.wall_now_ns);
  if (e->settler.pending() > 0)  // look again when what was seen may have settled
    self->delayed_send(handle(self), self->state.config.settle + std::chrono::milliseconds(1),
                       msg::look_now{e->config.name});
  std::set<std::uint64_t> present(settled.begin(), settled.end());
  for (auto& [v, entry] : e->versions) {
    entry.present = present.count(v) > 0;
    entry.kept = false;
  }
  for (auto v : settled)
    e->versions[v].present = true;
  for (auto& [id, a] : e->aliases)
    a.error.clear();
  reaspire(*e);
  after_event(self, *e);
}

// Takes in what a previous run left registered: versions `m@N` and the model's aliases.
void adopt(self_ptr self, served_entry& e) {
  std::vector<std::string> aliases{e.config.name};
  for (auto& [label, v] : e.config.labels)
    aliases.push_back(label_id(e.config.name, label));
  e.adopting = static_cast<std::uint32_t>(1 + aliases.size());
  auto prefix = e.config.name + "@";
  ask_registry<std::vector<model_status>>(
      self, e, msg::list_models{prefix, 10'000, {}},
      [self, prefix](served_entry& e, expected<std::vector<model_status>> r) {
        if (r)
          for (auto& st : *r)
            if (st.id.rfind(prefix, 0) == 0)
              if (auto v = parse_version(st.id.substr(prefix.size())))
                e.versions[*v].state = version_state::ready;
        if (e.adopting > 0) --e.adopting;
        after_event(self, e);
      });
  for (auto& alias : aliases)
    check_alias(self, e, alias, std::nullopt);
}

void on_serve(self_ptr self, msg::serve_models& m) {
  auto& s = self->state;
  if (auto ok = check_served_models(m.config); !ok) return m.done(std::move(ok).error());
  std::set<std::string> names;
  std::vector<std::string> touched;
  for (auto& c : m.config.models) {
    names.insert(c.name);
    auto it = s.models.find(c.name);
    if (it == s.models.end()) {
      served_entry e(s.config.settle);
      e.config = c;
      e.generation = s.next_generation++;
      auto& added = s.models.emplace(c.name, std::move(e)).first->second;
      adopt(self, added);
      look(self, added);
      continue;
    }
    auto& e = it->second;
    if (e.config == c && !e.removing) continue;
    bool moved = base_of(e.config) != base_of(c);
    e.config = c;
    e.removing = false;
    if (moved) {
      e.remote = true;
      e.settler = version_settler(s.config.settle);
      for (auto& [v, entry] : e.versions)
        entry.present = false;
    }
    reaspire(e);
    touched.push_back(c.name);
    look(self, e);
  }
  for (auto& [name, e] : s.models)
    if (!names.count(name) && !e.removing) {
      if (s.config.watcher) s.config.watcher->unwatch(name);
      e.removing = true;
      reaspire(e);
      touched.push_back(name);
    }
  m.done({});
  if (auto& metrics = s.config.metrics)
    metrics->served_models.set(static_cast<std::int64_t>(m.config.models.size()));
  for (auto& name : touched)
    if (auto it = s.models.find(name); it != s.models.end()) after_event(self, it->second);
}

served_model_status status_of(const manager_state& s, const served_entry& e) {
  served_model_status st;
  st.config = e.config;
  auto now = s.config.time->now();
  for (auto& [v, entry] : e.versions) {
    version_status vs;
    vs.version = v;
    vs.state = entry.state;
    vs.aspired = entry.aspired;
    vs.error = entry.error;
    vs.failures = entry.failures;
    if (entry.state == version_state::error)
      vs.retry_in_seconds =
          std::max(0.0, std::chrono::duration<double>(entry.retry_at - now).count());
    st.versions.push_back(std::move(vs));
    st.rolling = st.rolling || entry.state == version_state::loading ||
                 entry.state == version_state::unloading;
  }
  for (auto& [id, a] : e.aliases) {
    if (!a.target) continue;
    if (id == e.config.name)
      st.default_version = a.target;
    else
      st.labels[id.substr(e.config.name.size() + 1)] = *a.target;
    st.rolling = st.rolling || a.busy;
  }
  st.source_error = e.source_error;
  if (st.source_error.empty())
    for (auto& [id, a] : e.aliases)
      if (!a.error.empty()) st.source_error = id + ": " + a.error;
  return st;
}

version_manager_actor::behavior_type manager(self_ptr self,
                                             std::shared_ptr<version_manager_config> config) {
  self->state.config = std::move(*config);
  self->send(handle(self), msg::poll_versions{});
  return {
      [=](msg::serve_models& m) { on_serve(self, m); },
      [=](msg::served_status& m) {
        std::vector<served_model_status> out;
        for (auto& [name, e] : self->state.models)
          if (!e.removing) out.push_back(status_of(self->state, e));
        m.done(std::move(out));
      },
      [=](msg::poll_versions) {
        for (auto& [name, e] : self->state.models)
          look(self, e);
        self->delayed_send(handle(self), self->state.config.poll, msg::poll_versions{});
      },
      [=](msg::look_now& m) {
        if (auto it = self->state.models.find(m.model); it != self->state.models.end())
          look(self, it->second);
      },
      [=](msg::versions_seen& m) { on_seen(self, m); },
      [=](msg::retry_versions& m) {
        if (auto* e = find(self, m.model, m.generation)) {
          reaspire(*e);
          after_event(self, *e);
        }
      },
      [=](msg::recheck_alias& m) {
        if (auto* e = find(self, m.model, m.generation)) check_alias(self, *e, m.alias, m.target);
      },
  };
}

}  // namespace

version_manager_actor spawn_version_manager(caf::actor_system& system,
                                            version_manager_config config) {
  return system.spawn(manager, std::make_shared<version_manager_config>(std::move(config)));
}

}  // namespace warm
