#include "actors/registry_actor.hpp"

#include <caf/all.hpp>

#include <map>
#include <unordered_map>

#include "actors/gather.hpp"
#include "core/batch_plan.hpp"
#include "actors/model_actor.hpp"
#include "actors/registry_writer.hpp"
#include "storage/located_file.hpp"
#include "storage/safetensors_file.hpp"
#include "warm/backend.hpp"
#include "warm/dense_model.hpp"

namespace warm {

// A description and the identity of the file it was read from.
struct registry_description {
  file_identity file;
  model_metadata meta;
};

// A model file resolved beneath its root, and what its backend says the registry needs.
struct model_resolution {
  model_location file;
  std::uint64_t bytes = 0;  // device bytes: the backend's prediction, or the size hint
  std::shared_ptr<const model_description> described;
  std::optional<file_identity> identity;  // the file as it was described (absent: unknown)
};

namespace {

using description = registry_description;

struct model_entry {
  model_record record;
  model_location file;      // resolved model file; its path is empty until resolved
  std::uint64_t bytes = 0;  // device bytes (size hint or header)
  model_actor actor;        // spawned at first use
  std::shared_ptr<const model_description> io;  // from the file once resolved; null if it could not be read
  std::shared_ptr<const description> described;  // the last description read (null: none yet)
  std::uint64_t generation = 0;  // this registration's (registry_state::next_generation)
};

template <class T>
using once_callback = msg::once_callback<T>;

// The version directory a registration serves: the registered one, else the one resolution chose.
std::optional<std::uint64_t> served_version(const model_record& record, const model_location& file) {
  return record.version ? record.version : file.version;
}

// A status's kind and inputs and outputs, from a resolution's description (none: left empty).
void set_io(model_status& st, const model_description* d) {
  if (!d) return;
  st.kind = d->kind;
  st.io = d->io;
  st.input_width = input_width(d->io);
  st.output_width = output_width(d->io);
}

struct vmodel_entry {
  vmodel_record record;
  vmodel_state state = vmodel_state::defined;
  std::optional<warm::error> error;
  // This registry loads the target and flips (its own setVModel, or a restart). A transition
  // taken in from a shared registry is driven by the instance that set it; setting the same
  // target here drives it here too (that instance may be gone).
  bool driving = false;
};

using resolved_fn = std::function<void(const expected<std::shared_ptr<const model_resolution>>&)>;

// A registration whose file is being resolved: not a model yet (no use, status or vmodel sees
// it), but a second identical registration joins it instead of resolving again.
struct pending_registration {
  model_record record;
  std::uint64_t generation = 0;
  std::vector<std::function<void(expected<void>)>> then;  // each request's continuation
};

struct registry_state {
  registry_config config;
  loader_pool_actor pool;
  watch_hub_actor hub;
  registry_writer_actor writer;
  std::uint64_t next_generation = 1;  // bumped by every registration taken in
  std::map<std::string, model_entry> models;
  std::map<std::string, vmodel_entry> vmodels;
  std::map<std::string, pending_registration> registering;
  // Continuations waiting for a resolution on the offload, by the registration's generation.
  std::map<std::uint64_t, std::vector<resolved_fn>> resolving;
  std::vector<registry_change> staged;
  std::vector<std::function<void(expected<void>)>> after_commit;
  std::vector<std::function<void(expected<void>)>> committing;  // the commit in flight's callbacks
  bool commit_in_flight = false;
  bool flush_sent = false;
  // A shared store (etcd): the revision of the last full contents taken in (older updates are
  // already in them), and others' changes waiting for the staged group computed before them.
  std::int64_t loaded_revision = 0;
  std::vector<std::shared_ptr<const registry_update>> deferred;

  // The registry stops last among the runtime's actors. Its writer still commits what is staged
  // (after any commit in flight), but those requests are answered `unavailable` (their follow-ups,
  // such as a load, cannot run any more; retrying is safe since registration is idempotent), like
  // the ones waiting for a resolution; and it takes its model actors with it.
  ~registry_state() {
    if (writer) caf::anon_send(writer, msg::store_close{std::move(staged)});
    auto down = make_error(errc::unavailable, "the runtime is shutting down");
    auto pending = std::move(registering);
    registering.clear();  // so the resolutions failed below find nothing to register
    for (auto& [id, p] : pending)
      for (auto& then : p.then) then(down);
    for (auto& cb : committing) cb(down);
    for (auto& cb : after_commit) cb(down);
    for (auto& [generation, waiting] : resolving)
      for (auto& fn : waiting) fn(down);
    for (auto& [id, e] : models)
      if (e.actor) caf::anon_send_exit(e.actor, caf::exit_reason::user_shutdown);
  }
};

using self_ptr = registry_actor::stateful_pointer<registry_state>;

warm::error unknown(const std::string& id) {
  return make_error(errc::not_found, "no model or vmodel '" + id + "' is registered");
}

// Stages a change; `then` runs once it is durable (or with the commit's error).
void stage(self_ptr self, std::vector<registry_change> changes, std::function<void(expected<void>)> then) {
  auto& s = self->state;
  for (auto& c : changes) s.staged.push_back(std::move(c));
  s.after_commit.push_back(std::move(then));
  if (!s.flush_sent) {
    s.flush_sent = true;
    self->send(caf::actor_cast<registry_actor>(self), msg::flush_registry{});
  }
}

void publish_counts(registry_state& s);
void take_in(self_ptr self, registry_contents contents);
void take_in_deferred(self_ptr self);
void load_target(self_ptr self, const std::string& vmodel, const std::string& target);
void committed(self_ptr self, msg::store_committed& outcome);
void registered(self_ptr self, const std::string& id,
                const expected<std::shared_ptr<const model_resolution>>& resolution);

// Sends the staged changes to the writer as one commit, unless one is in flight (then they go
// when it is answered: every request staged meanwhile joins the next group).
void flush(self_ptr self) {
  auto& s = self->state;
  s.flush_sent = false;
  if (s.commit_in_flight || (s.staged.empty() && s.after_commit.empty())) return take_in_deferred(self);
  s.commit_in_flight = true;
  s.committing = std::move(s.after_commit);
  s.after_commit.clear();
  auto changes = std::move(s.staged);
  s.staged.clear();
  self->request(s.writer, caf::infinite, msg::store_commit{std::move(changes)})
      .then([self](msg::store_committed& outcome) { committed(self, outcome); },
            [self](caf::error& e) {
              msg::store_committed lost{from_caf_error(e), std::nullopt};
              committed(self, lost);
            });
  take_in_deferred(self);
}

// A commit was answered. After a failure memory must not claim what the disk lacks: when the
// writer could re-read the disk, memory becomes what it holds, and the requests staged since
// (changes memory no longer has) fail with the same error.
void committed(self_ptr self, msg::store_committed& outcome) {
  auto& s = self->state;
  s.commit_in_flight = false;
  auto callbacks = std::move(s.committing);
  s.committing.clear();
  if (!outcome.result && outcome.disk) {
    take_in(self, std::move(*outcome.disk));
    s.staged.clear();
    for (auto& cb : std::exchange(s.after_commit, {})) callbacks.push_back(std::move(cb));
  }
  publish_counts(s);
  for (auto& cb : callbacks) cb(outcome.result);
  flush(self);
}

// Resolves a registration's model file beneath its root and checks its header, giving its size
// and widths. The device bytes are the weights' size, or the size hint when one is given: the
// hint reserves headroom beyond the weights and may not be smaller than they are. File work:
// runs on the offload, never on the registry.
expected<std::shared_ptr<const model_resolution>> resolve_file(const model_repository& repository,
                                                               const model_record& record) {
  auto file = repository.resolve(record.path, record.version);
  if (!file) return std::move(file).error();
  // The file's identity before it is described: a metadata request for the same file reuses
  // this description instead of reading it again (a TorchScript one loads the whole module).
  std::optional<file_identity> identity;
  if (auto opened = open_located(*file))
    if (auto id = opened->identity()) identity = *id;
  auto described = describe_model(*file);  // beneath the root, like every later open
  if (!described) return std::move(described).error();
  auto out = std::make_shared<model_resolution>();
  out->identity = identity;
  out->bytes = described->predicted_bytes;
  if (record.size_hint) {
    if (*record.size_hint < out->bytes)
      return make_error(errc::invalid_argument, "size hint of " + std::to_string(*record.size_hint) +
                                                    " bytes is smaller than the model's " +
                                                    std::to_string(out->bytes) + " bytes of weights");
    out->bytes = *record.size_hint;
  }
  out->file = std::move(*file);
  out->described = std::make_shared<const model_description>(std::move(*described));
  return std::shared_ptr<const model_resolution>(std::move(out));
}

// Runs `then` with registration `who`'s resolution, read on the offload (once for however many
// ask before it is back; model_resolved brings it). `then` may run after the registration ended
// or, with `unavailable`, while the registry stops: it must look its model up again, and touch
// nothing of the registry on an error.
void resolve_then(self_ptr self, const msg::registration& who, const model_record& record, resolved_fn then) {
  auto& s = self->state;
  auto& waiting = s.resolving[who.generation];
  waiting.push_back(std::move(then));
  if (waiting.size() > 1) return;
  auto task = [registry = caf::actor_cast<registry_actor>(self), who, record, repository = s.config.repository] {
    caf::anon_send(registry, msg::model_resolved{who, resolve_file(*repository, record)});
  };
  if (s.config.offload)
    s.config.offload(std::move(task));
  else
    task();  // its answer still arrives as a message
}

model_entry* find(registry_state& s, const msg::registration& who) {
  auto it = s.models.find(who.id);
  return it == s.models.end() || it->second.generation != who.generation ? nullptr : &it->second;
}

// Runs `then` once `e`'s file is resolved (at once when it is). A failure is passed on, not kept:
// the next request reads the header again.
void when_resolved(self_ptr self, model_entry& e, std::function<void(expected<void>)> then) {
  if (!e.file.path.empty()) return then({});
  resolve_then(self, {e.record.id, e.generation}, e.record, [then = std::move(then)](const auto& r) {
    then(r ? expected<void>{} : expected<void>{r.error()});
  });
}

// Runs `then` with `e`'s model actor, spawned at the first use (after resolving its file).
void with_actor(self_ptr self, model_entry& e, std::function<void(expected<model_actor>)> then) {
  if (e.actor) return then(e.actor);
  when_resolved(self, e, [self, who = msg::registration{e.record.id, e.generation}, then](expected<void> r) {
    if (!r) return then(r.error().code == errc::unavailable ? r.error() : make_error(errc::load_failed, r.error().message));
    auto& s = self->state;
    auto* e = find(s, who);
    if (!e) return then(make_error(errc::not_found, "model '" + who.id + "' was unregistered meanwhile"));
    if (!e->actor)
      e->actor = spawn_model_actor(self->system(), {e->record.id, e->generation, e->file, e->bytes, s.pool,
                                                    s.config.routes, s.config.time, s.hub, s.config.offload});
    then(e->actor);
  });
}

void use(self_ptr self, const std::string& model, msg::use_kind kind, timestamp arrival,
         std::function<void(expected<msg::acquired>)> done) {
  auto& s = self->state;
  auto it = s.models.find(model);
  if (it == s.models.end()) {
    if (done) done(unknown(model));
    return;
  }
  once_callback<msg::acquired> answer(std::move(done));
  with_actor(self, it->second, [self, kind, arrival, answer](expected<model_actor> actor) {
    if (!actor) return answer(std::move(actor).error());
    self->send(*actor, msg::client_use{kind, arrival, answer});  // answered to the client directly
  });
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
  self->request(it->second.actor, caf::infinite, msg::unload{it->first, nullptr, eviction_reason::unload})
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

// Describes the model's file: opened beneath its root on the offload thread, answered from the
// last description when the file's identity is unchanged, else its header parsed again there and
// the new description sent back here (description_read). The registry itself only looks up.
// The worker is a plain thread, not an actor: its answer goes to the client's callback directly.
void describe(self_ptr self, const msg::registration& who, callback<model_metadata> done);

// A model's metadata as a description of its file (`file`, as it was when described).
std::shared_ptr<description> make_description(const file_identity& file, const std::string& id,
                                              std::optional<std::uint64_t> version, std::uint64_t bytes,
                                              const model_location& where, const model_description& described) {
  auto read = std::make_shared<description>();
  read->file = file;
  read->meta.id = id;
  read->meta.version = version ? version : where.version;
  read->meta.bytes = bytes;
  read->meta.kind = described.kind;
  read->meta.io = described.io;
  read->meta.input_width = input_width(described.io);
  read->meta.output_width = output_width(described.io);
  read->meta.layers = described.layers;
  read->meta.activation = described.activation;
  return read;
}

// The description a resolution read, kept as a describe would keep it (null when the file's
// identity was not known): the first describe of an unchanged file answers from it.
std::shared_ptr<const description> resolved_description(const model_resolution& r, const model_record& record) {
  if (!r.identity || !r.described) return nullptr;
  return make_description(*r.identity, record.id, record.version, r.bytes, r.file, *r.described);
}

void on_describe(self_ptr self, msg::describe_model& m) {
  auto& s = self->state;
  auto it = s.models.find(model_named(s, m.id));
  if (it == s.models.end()) return m.done(unknown(m.id));
  auto& e = it->second;
  when_resolved(self, e, [self, who = msg::registration{e.record.id, e.generation}, done = std::move(m.done)](
                             expected<void> r) mutable {
    if (!r) return done(r.error().code == errc::unavailable ? r.error() : make_error(errc::load_failed, r.error().message));
    describe(self, who, std::move(done));
  });
}

void describe(self_ptr self, const msg::registration& registered, callback<model_metadata> done) {
  auto& s = self->state;
  auto* found = find(s, registered);
  if (!found) return done(make_error(errc::not_found, "model '" + registered.id + "' was unregistered meanwhile"));
  auto& e = *found;
  auto task = [registry = caf::actor_cast<registry_actor>(self), who = msg::registration{e.record.id, e.generation},
               id = e.record.id, version = e.record.version,
               bytes = e.bytes, where = e.file, last = e.described, done = std::move(done)]() mutable {
    auto failed = [&](const error& why) { done(make_error(errc::load_failed, why.message)); };
    auto file = open_located(where);
    if (!file) return failed(file.error());
    auto identity = file->identity();
    if (!identity) return failed(identity.error());
    if (last && last->file == *identity) return done(last->meta);
    auto described = describe_model(where);
    if (!described) return failed(described.error());
    auto read = make_description(*identity, id, version, bytes, where, *described);
    caf::anon_send(registry, msg::description_read{who, read});
    done(read->meta);
  };
  if (s.config.offload)
    s.config.offload(std::move(task));
  else
    task();
}

// Keeps a description read by a describe's worker, unless the registration changed meanwhile.
void on_description_read(self_ptr self, msg::description_read& m) {
  auto it = self->state.models.find(m.who.id);
  if (it == self->state.models.end() || it->second.generation != m.who.generation) return;
  auto& kept = it->second.described;
  if (!kept || kept->file != m.read->file) kept = std::move(m.read);
}

// Keeps the metrics' registry gauges current (after each commit and each reload).
void publish_counts(registry_state& s) {
  if (!s.config.metrics) return;
  s.config.metrics->models_registered.set(static_cast<std::int64_t>(s.models.size()));
  s.config.metrics->vmodels_registered.set(static_cast<std::int64_t>(s.vmodels.size()));
}

void drop_model(self_ptr self, const std::string& id) {
  auto& s = self->state;
  auto it = s.models.find(id);
  if (it == s.models.end()) return;
  if (it->second.actor) self->send(it->second.actor, msg::model_unregister{});
  s.models.erase(it);
  if (s.config.on_batching) s.config.on_batching(id, std::nullopt);
}

bool referenced(const registry_state& s, const std::string& model, std::string* by = nullptr) {
  for (auto& [id, v] : s.vmodels)
    if (v.record.active == model || v.record.target == model) {
      if (by) *by = id;
      return true;
    }
  return false;
}

// Unregisters models marked auto-delete that no vmodel references any more.
std::vector<registry_change> collect_orphans(self_ptr self, std::vector<std::string> candidates) {
  std::vector<registry_change> changes;
  for (auto& m : candidates) {
    auto it = self->state.models.find(m);
    if (it == self->state.models.end() || !it->second.record.auto_delete || referenced(self->state, m)) continue;
    drop_model(self, m);
    changes.push_back(erase_model{m});
  }
  return changes;
}

// Makes memory (tables, aliases, transitions) what `contents` says the disk holds.
void take_in(self_ptr self, registry_contents contents) {
  auto& s = self->state;
  s.loaded_revision = std::max(s.loaded_revision, contents.revision);
  std::map<std::string, model_entry> models;
  for (auto& r : contents.models) {
    auto old = s.models.find(r.id);
    if (old != s.models.end() && old->second.record == r) {
      models.emplace(r.id, std::move(old->second));
      s.models.erase(old);
    } else {
      models.emplace(r.id, model_entry{r, {}, 0, {}, nullptr, nullptr, s.next_generation++});
    }
  }
  for (auto& [id, e] : s.models) {
    if (e.actor) self->send(e.actor, msg::model_unregister{});
    if (s.config.on_batching && !models.count(id)) s.config.on_batching(id, std::nullopt);
  }
  s.models = std::move(models);
  if (s.config.on_batching)
    for (auto& [id, e] : s.models) s.config.on_batching(id, e.record.batching);
  // A vmodel the disk shows unchanged keeps its state (a transition in flight stays in flight);
  // any other that is between models starts its transition again: nothing else would flip it.
  std::map<std::string, vmodel_entry> vmodels;
  std::vector<std::pair<std::string, std::string>> transitions;
  for (auto& v : contents.vmodels) {
    auto old = s.vmodels.find(v.id);
    if (old != s.vmodels.end() && old->second.record == v) {
      vmodels.emplace(v.id, std::move(old->second));
      continue;
    }
    auto state = v.active == v.target ? vmodel_state::defined : vmodel_state::transitioning;
    vmodels.emplace(v.id, vmodel_entry{v, state, {}});
    if (state == vmodel_state::transitioning) transitions.emplace_back(v.id, v.target);
  }
  s.vmodels = std::move(vmodels);
  std::unordered_map<std::string, std::string> aliases;
  for (auto& [id, v] : s.vmodels)
    if (!v.record.active.empty()) aliases.emplace(id, v.record.active);
  s.config.routes->replace_aliases(std::move(aliases));
  for (auto& [vmodel, target] : transitions) load_target(self, vmodel, target);
}

// Takes in one change another instance made to the shared store. A vmodel between models is
// left to the instance that retargeted it: it loads the target and writes the flip, which
// arrives here as another change.
void take_in_change(self_ptr self, const registry_change& change) {
  auto& s = self->state;
  if (auto* put = std::get_if<put_model>(&change)) {
    auto& r = put->record;
    auto it = s.models.find(r.id);
    if (it != s.models.end() && it->second.record == r) return;
    if (it != s.models.end() && it->second.record.path == r.path && it->second.record.version == r.version &&
        it->second.record.size_hint == r.size_hint) {
      // The same model file and size (auto-delete or batching changed): it stays loaded.
      const bool batching_changed = it->second.record.batching != r.batching;
      it->second.record = r;
      if (batching_changed && s.config.on_batching) s.config.on_batching(r.id, r.batching);
      return;
    }
    if (it != s.models.end()) {
      if (it->second.actor) self->send(it->second.actor, msg::model_unregister{});
      s.models.erase(it);
    }
    s.models.emplace(r.id, model_entry{r, {}, 0, {}, nullptr, nullptr, s.next_generation++});
    if (s.config.on_batching) s.config.on_batching(r.id, r.batching);
  } else if (auto* erase = std::get_if<erase_model>(&change)) {
    drop_model(self, erase->id);
  } else if (auto* putv = std::get_if<put_vmodel>(&change)) {
    auto& v = putv->record;
    auto it = s.vmodels.find(v.id);
    if (it != s.vmodels.end() && it->second.record == v) return;
    auto state = v.active == v.target ? vmodel_state::defined : vmodel_state::transitioning;
    s.vmodels[v.id] = vmodel_entry{v, state, {}};
    if (v.active.empty())
      s.config.routes->erase_alias(v.id);
    else
      s.config.routes->put_alias(v.id, v.active);
  } else if (auto* erasev = std::get_if<erase_vmodel>(&change)) {
    if (s.vmodels.erase(erasev->id)) s.config.routes->erase_alias(erasev->id);
  }
}

// Takes in the changes others made, once no staged change was computed before them: a group
// staged earlier goes to the store first, compared with the revisions it was computed on (so it
// fails, and memory becomes what the store holds, if it touches what they changed). Each is then
// passed to the writer (store_seen), after that group and before any staged later.
void take_in_deferred(self_ptr self) {
  auto& s = self->state;
  if (s.deferred.empty() || !s.staged.empty()) return;
  for (auto& update : std::exchange(s.deferred, {})) {
    if (update->revision <= s.loaded_revision) continue;  // already in contents taken in since
    if (update->reset)
      take_in(self, *update->reset);
    else
      for (std::size_t i = 0; i < update->changes.size(); ++i)
        if (i >= update->revisions.size() || update->revisions[i] > s.loaded_revision)
          take_in_change(self, update->changes[i]);
    self->send(s.writer, msg::store_seen{update});
  }
  publish_counts(s);
}

void on_store_update(self_ptr self, msg::store_update& m) {
  self->state.deferred.push_back(std::move(m.update));
  take_in_deferred(self);
}

// Answers `set` with model `id`'s status: NOT_FOUND, NOT_LOADED without an actor, else the model
// actor's. A model not resolved since a restart is resolved first (on the offload, once), so its
// bytes and widths show before its first use; a failure leaves them 0 and is reported by the
// first use.
void status_of(self_ptr self, const std::string& id, std::function<void(model_status)> set, bool resolve_first = true) {
  auto& s = self->state;
  auto it = s.models.find(id);
  if (it == s.models.end()) {
    model_status st;
    st.id = id;
    return set(std::move(st));
  }
  auto& e = it->second;
  if (!e.actor && e.file.path.empty() && resolve_first)
    return when_resolved(self, e, [self, id, set](expected<void> r) {
      if (!r && r.error().code == errc::unavailable) {  // stopping: the registry is going away
        model_status st;
        st.id = id;
        return set(std::move(st));
      }
      status_of(self, id, set, false);
    });
  if (!e.actor) {
    model_status st;
    st.id = id;
    st.state = model_state::not_loaded;
    st.bytes = e.bytes;
    set_io(st, e.io.get());
    st.batching = e.record.batching;
    st.version = served_version(e.record, e.file);
    return set(std::move(st));
  }
  self->request(e.actor, caf::infinite, msg::model_status_request{})
      .then(
          [set, io = e.io, batching = e.record.batching, version = served_version(e.record, e.file)](model_status& st) {
            set_io(st, io.get());
            st.batching = batching;
            st.version = version;
            set(std::move(st));
          },
          [set, id](caf::error&) {  // the model actor stopped: unregistered meanwhile
            model_status st;
            st.id = id;
            set(std::move(st));
          });
}

// The statuses of `ids`, in order, once all are known.
void statuses(self_ptr self, const std::vector<std::string>& ids, std::function<void(std::vector<model_status>)> done) {
  auto g = gather<model_status>::create(ids.size(), std::move(done));
  for (std::size_t i = 0; i < ids.size(); ++i)
    status_of(self, ids[i], [g, i](model_status st) { g->set(i, std::move(st)); });
}

void vmodel_status_of(self_ptr self, const std::string& id, callback<vmodel_status> done) {
  auto it = self->state.vmodels.find(id);
  if (it == self->state.vmodels.end()) {
    done(make_error(errc::not_found, "no vmodel '" + id + "'"));
    return;
  }
  vmodel_status v;
  v.id = id;
  v.state = it->second.state;
  v.active = it->second.record.active;
  v.target = it->second.record.target;
  v.error = it->second.error;
  statuses(self, {v.active, v.target}, [v, done](std::vector<model_status> st) mutable {
    v.active_state = st[0].state;
    v.target_state = st[1].state;
    done(std::move(v));
  });
}

void on_target_ready(self_ptr self, const std::string& vmodel, const std::string& target, expected<void> result);

// Starts loading a vmodel's target: a waiting use requested from the target's model actor; the
// flip happens when it is answered (on_target_ready).
void load_target(self_ptr self, const std::string& vmodel, const std::string& target) {
  auto& s = self->state;
  if (auto v = s.vmodels.find(vmodel); v != s.vmodels.end()) v->second.driving = true;
  auto it = s.models.find(target);
  if (it == s.models.end()) return on_target_ready(self, vmodel, target, unknown(target));
  with_actor(self, it->second, [=](expected<model_actor> actor) {
    if (!actor) {
      if (actor.error().code != errc::unavailable) on_target_ready(self, vmodel, target, std::move(actor).error());
      return;
    }
    self->request(*actor, caf::infinite, msg::model_use{msg::use_kind::wait, self->state.config.time->now()})
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
  if (s.vmodels.count(m.id)) return reply(make_error(errc::invalid_argument, "'" + m.id + "' is a vmodel id"));
  if (m.info.path.empty()) return reply(make_error(errc::invalid_argument, "model path is empty"));
  if (m.info.batching)
    if (auto why = check_batching(*m.info.batching); !why.empty())
      return reply(make_error(errc::invalid_argument, "model '" + m.id + "': batching: " + why));
  auto then = [self, id = m.id, load_now = m.load_now || m.sync, sync = m.sync, reply](expected<void> r) {
    if (!r || !load_now) return reply(r);
    if (!sync) {
      use(self, id, msg::use_kind::proactive, self->state.config.time->now(), nullptr);
      return reply({});
    }
    use(self, id, msg::use_kind::wait, self->state.config.time->now(), [reply](expected<msg::acquired> a) {
      reply(a ? expected<void>{} : expected<void>{std::move(a).error()});
    });
  };
  auto existing = s.models.find(m.id);
  if (existing != s.models.end()) {
    auto& r = existing->second.record;
    if (r.path != m.info.path || r.version != m.info.version || r.size_hint != m.info.size_hint ||
        r.batching != m.info.batching)
      return reply(make_error(errc::invalid_argument, "model '" + m.id + "' is registered with different info (path '" +
                                                          r.path + "')"));
    return stage(self, {}, then);  // idempotent: answered with the next commit
  }
  model_record record{m.id, m.info.path, m.info.version, m.info.size_hint, false, m.info.batching};
  if (auto pending = s.registering.find(m.id); pending != s.registering.end()) {
    if (pending->second.record != record)
      return reply(make_error(errc::invalid_argument, "model '" + m.id +
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
  resolve_then(self, {m.id, pending.generation}, record, [self, id = m.id](const auto& r) { registered(self, id, r); });
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
    for (auto& then : pending.then) then(resolution.error());
    return;
  }
  if (auto taken = s.models.find(id); taken != s.models.end()) {
    // Another instance registered it meanwhile (a shared registry), and this one took it in.
    if (taken->second.record == pending.record)
      return stage(self, {}, [then = std::move(pending.then)](expected<void> r) {
        for (auto& t : then) t(r);
      });
    auto differs = make_error(errc::invalid_argument, "model '" + id + "' was registered meanwhile with different info (path '" +
                                                          taken->second.record.path + "')");
    for (auto& then : pending.then) then(differs);
    return;
  }
  auto& r = **resolution;
  model_entry e{pending.record, r.file, r.bytes, {}, r.described, resolved_description(r, pending.record),
                pending.generation};
  s.models.emplace(id, std::move(e));
  if (s.config.on_batching) s.config.on_batching(id, pending.record.batching);
  stage(self, {put_model{pending.record}}, [then = std::move(pending.then)](expected<void> r) {
    for (auto& t : then) t(r);
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
  for (auto& fn : node.mapped()) fn(m.result);
}

void on_unregister(self_ptr self, msg::unregister_model& m) {
  auto& s = self->state;
  if (!s.models.count(m.id)) return m.done(make_error(errc::not_found, "no model '" + m.id + "' is registered"));
  std::string by;
  if (referenced(s, m.id, &by))
    return m.done(make_error(errc::invalid_argument, "model '" + m.id + "' is in use by vmodel '" + by + "'"));
  drop_model(self, m.id);
  stage(self, {erase_model{m.id}}, std::move(m.done));
}

void on_set_vmodel(self_ptr self, msg::set_vmodel& m) {
  auto& s = self->state;
  auto reply = std::move(m.done);
  if (auto ok = check_id(m.id, "vmodel"); !ok) return reply(ok.error());
  if (s.models.count(m.id)) return reply(make_error(errc::invalid_argument, "'" + m.id + "' is a model id"));
  auto target = s.models.find(m.target);
  if (target == s.models.end()) return reply(make_error(errc::not_found, "no model '" + m.target + "' is registered"));
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
      return reply(make_error(errc::invalid_argument, "vmodel '" + m.id + "' does not exist; expected target '" +
                                                          *m.expected_target + "'"));
    if (auto room = check_room(s); !room) return reply(std::move(room).error());
    mark_target();
    vmodel_entry v{{m.id, m.target, m.target}, vmodel_state::defined, {}};
    s.vmodels.emplace(m.id, v);
    s.config.routes->put_alias(m.id, m.target);
    changes.push_back(put_vmodel{v.record});
    use(self, m.target, msg::use_kind::proactive, s.config.time->now(), nullptr);
  } else {
    auto& v = it->second;
    if (m.expected_target && *m.expected_target != v.record.target)
      return reply(make_error(errc::invalid_argument, "vmodel '" + m.id + "' targets '" + v.record.target +
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
  stage(self, std::move(changes), [self, id, start_load, target = m.target, reply](expected<void> r) {
    if (!r) return reply(std::move(r).error());
    if (start_load) load_target(self, id, target);
    vmodel_status_of(self, id, reply);
  });
}

// A vmodel's target answered its waiting use (`result`): flip the alias, or TRANSITION_FAILED.
void on_target_ready(self_ptr self, const std::string& vmodel, const std::string& target, expected<void> result) {
  auto& s = self->state;
  auto it = s.vmodels.find(vmodel);
  if (it == s.vmodels.end() || it->second.record.target != target || it->second.state != vmodel_state::transitioning)
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

registry_actor::behavior_type registry_behavior(self_ptr self, std::shared_ptr<registry_config> config,
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
      [=](msg::use_model& m) { use(self, model_named(self->state, m.target), m.kind, m.arrival, std::move(m.done)); },
      [=](msg::unload_model& m) { on_unload(self, m); },
      [=](msg::retry_model& m) { on_retry(self, m); },
      [=](msg::describe_model& m) { on_describe(self, m); },
      [=](msg::get_status& m) {
        statuses(self, {m.id}, [done = std::move(m.done)](std::vector<model_status> st) { done(std::move(st[0])); });
      },
      [=](msg::list_models& m) {
        auto& s = self->state;
        std::vector<std::string> ids;
        for (auto it = s.models.upper_bound(m.after); it != s.models.end(); ++it) {
          if (m.limit && ids.size() >= m.limit) break;
          ids.push_back(it->first);
        }
        statuses(self, ids, [done = std::move(m.done)](std::vector<model_status> st) { done(std::move(st)); });
      },
      [=](msg::set_vmodel& m) { on_set_vmodel(self, m); },
      [=](msg::delete_vmodel& m) { on_delete_vmodel(self, m); },
      [=](msg::get_vmodel_status& m) { vmodel_status_of(self, m.id, std::move(m.done)); },
      [=](msg::inspect_models& m) {
        auto& s = self->state;
        std::vector<std::string> ids;
        for (auto& [id, e] : s.models)
          if (e.actor) ids.push_back(id);
        auto registered = s.models.size(), vmodels = s.vmodels.size();
        statuses(self, ids, [done = std::move(m.done), registered, vmodels](std::vector<model_status> st) {
          done(std::move(st), registered, vmodels);
        });
      },
      [=](msg::flush_registry&) { flush(self); },
      [=](msg::description_read& m) { on_description_read(self, m); },
      [=](msg::model_resolved& m) { on_model_resolved(self, m); },
      [=](msg::store_update& m) { on_store_update(self, m); },
  };
}

}  // namespace

registry_actor spawn_registry(caf::actor_system& system, registry_config config) {
  if (!config.initial)
    if (auto stored = config.store->load()) config.initial = std::move(*stored);
  const auto since = config.initial ? config.initial->revision : 0;
  auto* store = config.store.get();  // owned by the writer until it stops, after the registry
  auto writer = spawn_registry_writer(system, std::move(config.store));
  auto registry = system.spawn<caf::detached>(registry_behavior, std::make_shared<registry_config>(std::move(config)),
                                              std::move(writer));
  store->follow(since, [weak = caf::actor_cast<caf::weak_actor_ptr>(registry)](registry_update update) {
    if (auto target = caf::actor_cast<registry_actor>(weak.lock()))
      caf::anon_send(target, msg::store_update{std::make_shared<const registry_update>(std::move(update))});
  });
  return registry;
}

}  // namespace warm
