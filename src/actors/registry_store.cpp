#include "actors/registry_impl.hpp"

#include "actors/protocol/model_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/registry_writer_protocol.hpp"
#include "actors/registry_writer.hpp"

namespace warm::registry_impl {

// Stages a change; `then` runs once it is durable (or with the commit's error).
void stage(self_ptr self, std::vector<registry_change> changes,
           std::function<void(expected<void>)> then) {
  auto& s = self->state;
  for (auto& c : changes)
    s.staged.push_back(std::move(c));
  s.after_commit.push_back(std::move(then));
  if (!s.flush_sent) {
    s.flush_sent = true;
    self->send(caf::actor_cast<registry_actor>(self), msg::flush_registry{});
  }
}

// Sends the staged changes to the writer as one commit, unless one is in flight (then they go
// when it is answered: every request staged meanwhile joins the next group).
void flush(self_ptr self) {
  auto& s = self->state;
  s.flush_sent = false;
  if (s.commit_in_flight || (s.staged.empty() && s.after_commit.empty()))
    return take_in_deferred(self);
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
    for (auto& cb : std::exchange(s.after_commit, {}))
      callbacks.push_back(std::move(cb));
  }
  publish_counts(s);
  for (auto& cb : callbacks)
    cb(outcome.result);
  flush(self);
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

bool referenced(const registry_state& s, const std::string& model, std::string* by) {
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
    if (it == self->state.models.end() || !it->second.record.auto_delete ||
        referenced(self->state, m))
      continue;
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
    for (auto& [id, e] : s.models)
      s.config.on_batching(id, e.record.batching);
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
  for (auto& [vmodel, target] : transitions)
    load_target(self, vmodel, target);
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
    if (it != s.models.end() && it->second.record.path == r.path &&
        it->second.record.version == r.version && it->second.record.size_hint == r.size_hint) {
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

}  // namespace warm::registry_impl
