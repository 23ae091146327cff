// The registry actor's state and the functions its handlers share, internal to src/actors: the
// actor's behaviour and its requests (registry_actor.cpp), its group commit and the contents it
// takes in from its store (registry_store.cpp), and the resolution, description and status of its
// models' files (registry_files.cpp). Every function runs on the registry actor (its `self`), but
// resolve_file, which runs on the offload thread.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/registry_writer_protocol.hpp"
#include "actors/registry_actor.hpp"
#include "core/once_callback.hpp"
#include "storage/file.hpp"
#include "warm/backend.hpp"

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

namespace registry_impl {

using description = registry_description;

struct model_entry {
  model_record record;
  model_location file;      // resolved model file; its path is empty until resolved
  std::uint64_t bytes = 0;  // device bytes (size hint or header)
  model_actor actor;        // spawned at first use
  std::shared_ptr<const model_description>
      io;  // from the file once resolved; null if it could not be read
  std::shared_ptr<const description> described;  // the last description read (null: none yet)
  std::uint64_t generation = 0;  // this registration's (registry_state::next_generation)
};

template <class T>
using once_callback = once_callback<T>;

// The version directory a registration serves: the registered one, else the one resolution chose.
inline std::optional<std::uint64_t> served_version(const model_record& record,
                                                   const model_location& file) {
  return record.version ? record.version : file.version;
}

// A status's kind and inputs and outputs, from a resolution's description (none: left empty).
inline void set_io(model_status& st, const model_description* d) {
  if (!d) return;
  st.kind = d->kind;
  // A model a runtime serves (warm.json) declares nothing until it is loaded: the loaded model's
  // declaration, when the model actor gave one, stands.
  if (!d->io.inputs.empty() || !d->io.outputs.empty() || st.io.inputs.empty()) st.io = d->io;
  st.input_width = input_width(st.io);
  st.output_width = output_width(st.io);
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
      for (auto& then : p.then)
        then(down);
    for (auto& cb : committing)
      cb(down);
    for (auto& cb : after_commit)
      cb(down);
    for (auto& [generation, waiting] : resolving)
      for (auto& fn : waiting)
        fn(down);
    for (auto& [id, e] : models)
      if (e.actor) caf::anon_send_exit(e.actor, caf::exit_reason::user_shutdown);
  }
};

using self_ptr = registry_actor::stateful_pointer<registry_state>;

inline warm::error unknown(const std::string& id) {
  return make_error(errc::not_found, "no model or vmodel '" + id + "' is registered");
}

// registry_store.cpp: the group commit and what the store holds
// Stages a change; `then` runs once it is durable (or with the commit's error).
void stage(self_ptr self, std::vector<registry_change> changes,
           std::function<void(expected<void>)> then);
// Sends the staged changes to the writer as one commit, unless one is in flight (then they go
// when it is answered: every request staged meanwhile joins the next group).
void flush(self_ptr self);
// A commit was answered. After a failure memory must not claim what the disk lacks: when the
// writer could re-read the disk, memory becomes what it holds, and the requests staged since
// (changes memory no longer has) fail with the same error.
void committed(self_ptr self, msg::store_committed& outcome);
// Keeps the metrics' registry gauges current (after each commit and each reload).
void publish_counts(registry_state& s);
void drop_model(self_ptr self, const std::string& id);
bool referenced(const registry_state& s, const std::string& model, std::string* by = nullptr);
// Unregisters models marked auto-delete that no vmodel references any more.
std::vector<registry_change> collect_orphans(self_ptr self, std::vector<std::string> candidates);
// Makes memory (tables, aliases, transitions) what `contents` says the disk holds.
void take_in(self_ptr self, registry_contents contents);
// Takes in one change another instance made to the shared store. A vmodel between models is
// left to the instance that retargeted it: it loads the target and writes the flip, which
// arrives here as another change.
void take_in_change(self_ptr self, const registry_change& change);
// Takes in the changes others made, once no staged change was computed before them: a group
// staged earlier goes to the store first, compared with the revisions it was computed on (so it
// fails, and memory becomes what the store holds, if it touches what they changed). Each is then
// passed to the writer (store_seen), after that group and before any staged later.
void take_in_deferred(self_ptr self);
void on_store_update(self_ptr self, msg::store_update& m);

// registry_files.cpp: model files resolved and described; statuses
using locate_fn = decltype(registry_config::locate_remote);
// Resolves a registration's model file beneath its root and checks its header, giving its size
// and widths. The device bytes are the weights' size, or the size hint when one is given: the
// hint reserves headroom beyond the weights and may not be smaller than they are. File work:
// runs on the offload, never on the registry.
// A path that is an object URL, or that no local root holds, is located remotely (`locate`, when
// set), its copy pinned while it is described.
expected<std::shared_ptr<const model_resolution>> resolve_file(const model_repository& repository,
                                                               const locate_fn& locate,
                                                               const model_record& record);
// Runs `then` with registration `who`'s resolution, read on the offload (once for however many
// ask before it is back; model_resolved brings it). `then` may run after the registration ended
// or, with `unavailable`, while the registry stops: it must look its model up again, and touch
// nothing of the registry on an error.
void resolve_then(self_ptr self, const msg::registration& who, const model_record& record,
                  resolved_fn then);
// Runs `then` once `e`'s file is resolved (at once when it is). A failure is passed on, not kept:
// the next request reads the header again.
void when_resolved(self_ptr self, model_entry& e, std::function<void(expected<void>)> then);
// A model's metadata as a description of its file (`file`, as it was when described).
std::shared_ptr<description> make_description(const file_identity& file, const std::string& id,
                                              std::optional<std::uint64_t> version,
                                              std::uint64_t bytes, const model_location& where,
                                              const model_description& described);
// The description a resolution read, kept as a describe would keep it (null when the file's
// identity was not known): the first describe of an unchanged file answers from it.
std::shared_ptr<const description> resolved_description(const model_resolution& r,
                                                        const model_record& record);
void on_describe(self_ptr self, msg::describe_model& m);
// Describes the model's file: opened beneath its root on the offload thread, answered from the
// last description when the file's identity is unchanged, else its header parsed again there and
// the new description sent back here (description_read). The registry itself only looks up.
// The worker is a plain thread, not an actor: its answer goes to the client's callback directly.
// `loaded`: what a loaded model declared, answered in place of a file's empty declaration (a
// warm.json model's tensors are known only once a runtime has loaded it).
void describe(self_ptr self, const msg::registration& registered, callback<model_metadata> done,
              model_io loaded = {});
// Keeps a description read by a describe's worker, unless the registration changed meanwhile.
void on_description_read(self_ptr self, msg::description_read& m);
// Answers `set` with model `id`'s status: NOT_FOUND, NOT_LOADED without an actor, else the model
// actor's. A model not resolved since a restart is resolved first (on the offload, once), so its
// bytes and widths show before its first use; a failure leaves them 0 and is reported by the
// first use.
void status_of(self_ptr self, const std::string& id, std::function<void(model_status)> set,
               bool resolve_first = true);
// The statuses of `ids`, in order, once all are known.
void statuses(self_ptr self, const std::vector<std::string>& ids,
              std::function<void(std::vector<model_status>)> done);
void vmodel_status_of(self_ptr self, const std::string& id, callback<vmodel_status> done);

// registry_actor.cpp: requests
model_entry* find(registry_state& s, const msg::registration& who);
// Runs `then` with `e`'s model actor, spawned at the first use (after resolving its file).
void with_actor(self_ptr self, model_entry& e, std::function<void(expected<model_actor>)> then);
void use(self_ptr self, const std::string& model, use_kind kind, timestamp arrival,
         std::function<void(expected<acquired>)> done);
// The model a request names: itself, or a vmodel's active model.
const std::string& model_named(const registry_state& s, const std::string& id);
void on_unload(self_ptr self, msg::unload_model& m);
void on_retry(self_ptr self, msg::retry_model& m);
// Starts loading a vmodel's target: a waiting use requested from the target's model actor; the
// flip happens when it is answered (on_target_ready).
void load_target(self_ptr self, const std::string& vmodel, const std::string& target);
// Models and vmodels together may number at most max_models: each costs a row, memory and (a
// vmodel) a route; capacity_exhausted naming the limit when one more would pass it.
expected<void> check_room(const registry_state& s);
void on_register(self_ptr self, msg::register_model& m);
// A registration's file was resolved (or not): the model enters the tables and its record is
// staged, or every request that joined it gets the error.
void registered(self_ptr self, const std::string& id,
                const expected<std::shared_ptr<const model_resolution>>& resolution);
// A resolution is back from the offload: kept by the entry it was read for (when that
// registration is still current), then passed to whatever waited for it.
void on_model_resolved(self_ptr self, msg::model_resolved& m);
void on_unregister(self_ptr self, msg::unregister_model& m);
void on_set_vmodel(self_ptr self, msg::set_vmodel& m);
// A vmodel's target answered its waiting use (`result`): flip the alias, or TRANSITION_FAILED.
void on_target_ready(self_ptr self, const std::string& vmodel, const std::string& target,
                     expected<void> result);
void on_delete_vmodel(self_ptr self, msg::delete_vmodel& m);

}  // namespace registry_impl
}  // namespace warm
