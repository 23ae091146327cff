#include "actors/registry_impl.hpp"

#include "actors/gather.hpp"
#include "actors/protocol/model_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "sources/object_url.hpp"
#include "storage/located_file.hpp"
#include "storage/safetensors_file.hpp"
#include "warm/dense_model.hpp"

namespace warm::registry_impl {

// Resolves a registration's model file beneath its root and checks its header, giving its size
// and widths. The device bytes are the weights' size, or the size hint when one is given: the
// hint reserves headroom beyond the weights and may not be smaller than they are. File work:
// runs on the offload, never on the registry.
expected<std::shared_ptr<const model_resolution>> resolve_file(const model_repository& repository,
                                                               const locate_fn& locate,
                                                               const model_record& record) {
  const bool remote = sources::is_remote(record.path);
  expected<model_location> file = make_error(errc::not_found, "");
  if (!remote) file = repository.resolve(record.path, record.version);
  std::shared_ptr<void> pin;  // a remote model's copy stays in the tier while it is described
  if (remote || (!file && file.error().code == errc::not_found && locate)) {
    if (!locate)
      return invalid_input("'" + record.path +
                           "' is a remote source, and remote sources are not configured here");
    auto copy = locate(record.path, record.version);
    if (!copy)
      return remote || copy.error().code != errc::not_found ? std::move(copy).error()
                                                            : std::move(file).error();
    file = std::move(copy->where);
    pin = std::move(copy->pin);
  }
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
      return make_error(errc::invalid_argument,
                        "size hint of " + std::to_string(*record.size_hint) +
                            " bytes is smaller than the model's " + std::to_string(out->bytes) +
                            " bytes of weights");
    out->bytes = *record.size_hint;
  }
  out->file = std::move(*file);
  out->file.arriving.reset();  // a header copy, or a fetch in flight: only this describe reads it
  out->described = std::make_shared<const model_description>(std::move(*described));
  return std::shared_ptr<const model_resolution>(std::move(out));
}

// Runs `then` with registration `who`'s resolution, read on the offload (once for however many
// ask before it is back; model_resolved brings it). `then` may run after the registration ended
// or, with `unavailable`, while the registry stops: it must look its model up again, and touch
// nothing of the registry on an error.
void resolve_then(self_ptr self, const msg::registration& who, const model_record& record,
                  resolved_fn then) {
  auto& s = self->state;
  auto& waiting = s.resolving[who.generation];
  waiting.push_back(std::move(then));
  if (waiting.size() > 1) return;
  auto task = [registry = caf::actor_cast<registry_actor>(self), who, record,
               repository = s.config.repository, locate = s.config.locate_remote] {
    caf::anon_send(registry, msg::model_resolved{who, resolve_file(*repository, locate, record)});
  };
  if (s.config.offload)
    s.config.offload(std::move(task));
  else
    task();  // its answer still arrives as a message
}

// Runs `then` once `e`'s file is resolved (at once when it is). A failure is passed on, not kept:
// the next request reads the header again.
void when_resolved(self_ptr self, model_entry& e, std::function<void(expected<void>)> then) {
  if (!e.file.path.empty()) return then({});
  resolve_then(self, {e.record.id, e.generation}, e.record,
               [then = std::move(then)](const auto& r) {
                 then(r ? expected<void>{} : expected<void>{r.error()});
               });
}

// A model's metadata as a description of its file (`file`, as it was when described).
std::shared_ptr<description> make_description(const file_identity& file, const std::string& id,
                                              std::optional<std::uint64_t> version,
                                              std::uint64_t bytes, const model_location& where,
                                              const model_description& described) {
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
std::shared_ptr<const description> resolved_description(const model_resolution& r,
                                                        const model_record& record) {
  if (!r.identity || !r.described) return nullptr;
  return make_description(*r.identity, record.id, record.version, r.bytes, r.file, *r.described);
}

void on_describe(self_ptr self, msg::describe_model& m) {
  auto& s = self->state;
  auto it = s.models.find(model_named(s, m.id));
  if (it == s.models.end()) return m.done(unknown(m.id));
  auto& e = it->second;
  when_resolved(
      self, e,
      [self, who = msg::registration{e.record.id, e.generation},
       done = std::move(m.done)](expected<void> r) mutable {
        if (!r)
          return done(r.error().code == errc::unavailable
                          ? r.error()
                          : make_error(errc::load_failed, r.error().message));
        // A model a runtime serves declares its tensors only when loaded: ask the
        // model actor for what its load declared.
        auto* e = find(self->state, who);
        if (!e || !e->actor || !e->io || !e->io->io.inputs.empty() || !e->io->io.outputs.empty())
          return describe(self, who, std::move(done));
        self->request(e->actor, caf::infinite, msg::model_status_request{})
            .then(
                [self, who, done](model_status& st) mutable {
                  describe(self, who, std::move(done), std::move(st.io));
                },
                [self, who, done](caf::error&) mutable { describe(self, who, std::move(done)); });
      });
}

void describe(self_ptr self, const msg::registration& registered, callback<model_metadata> done,
              model_io loaded) {
  auto& s = self->state;
  if (!loaded.inputs.empty())  // the file declares nothing: the loaded model's declaration
    done = [done = std::move(done), loaded = std::move(loaded)](expected<model_metadata> meta) {
      if (meta && meta->io.inputs.empty() && meta->io.outputs.empty()) {
        meta->io = loaded;
        meta->input_width = input_width(loaded);
        meta->output_width = output_width(loaded);
      }
      done(std::move(meta));
    };
  auto* found = find(s, registered);
  if (!found)
    return done(
        make_error(errc::not_found, "model '" + registered.id + "' was unregistered meanwhile"));
  auto& e = *found;
  auto task = [registry = caf::actor_cast<registry_actor>(self),
               who = msg::registration{e.record.id, e.generation}, id = e.record.id,
               version = e.record.version, bytes = e.bytes, where = e.file, last = e.described,
               locate = s.config.locate_remote, done = std::move(done)]() mutable {
    auto failed = [&](const error& why) { done(make_error(errc::load_failed, why.message)); };
    // A remote model's copy: in the tier (evicted meanwhile: fetched again), or registered from
    // its header alone (its path is then the object's URL, never opened as a local path).
    auto file = where.source.empty() || !sources::is_remote(where.path)
                    ? open_located(where)
                    : expected<read_file>(make_error(errc::not_found, where.path));
    std::shared_ptr<void> pin;
    if (!file && !where.source.empty() && locate) {
      auto copy = locate(where.source, where.version);
      if (!copy) return failed(copy.error());
      where = std::move(copy->where);
      pin = std::move(copy->pin);
      file = open_located(where);
    }
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

// Answers `set` with model `id`'s status: NOT_FOUND, NOT_LOADED without an actor, else the model
// actor's. A model not resolved since a restart is resolved first (on the offload, once), so its
// bytes and widths show before its first use; a failure leaves them 0 and is reported by the
// first use.
void status_of(self_ptr self, const std::string& id, std::function<void(model_status)> set,
               bool resolve_first) {
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
    st.source = e.file.source;
    return set(std::move(st));
  }
  self->request(e.actor, caf::infinite, msg::model_status_request{})
      .then(
          [set, io = e.io, batching = e.record.batching, version = served_version(e.record, e.file),
           source = e.file.source](model_status& st) {
            set_io(st, io.get());
            st.batching = batching;
            st.version = version;
            st.source = source;
            set(std::move(st));
          },
          [set, id](caf::error&) {  // the model actor stopped: unregistered meanwhile
            model_status st;
            st.id = id;
            set(std::move(st));
          });
}

// The statuses of `ids`, in order, once all are known.
void statuses(self_ptr self, const std::vector<std::string>& ids,
              std::function<void(std::vector<model_status>)> done) {
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

}  // namespace warm::registry_impl
