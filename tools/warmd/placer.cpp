#include "placer.hpp"

#include "placer_impl.hpp"

namespace warm::warmd {

placer::migration placer::migrate(const std::vector<migrant>& models,
                                  std::chrono::steady_clock::time_point deadline) {
  auto& i = *impl_;
  migration out;
  auto membership = i.o.membership->status();
  node::placement_inputs in;
  in.members = i.members_now(membership);
  in.claim_life_ms = i.o.claim_life.count();

  struct waiting {
    std::mutex mutex;
    std::condition_variable done;
    std::size_t outstanding = 0, loaded = 0;
  };
  auto w = std::make_shared<waiting>();
  using action = node::placement_decision::action;
  for (const auto& m : models) {
    auto held = std::any_of(in.members.begin(), in.members.end(), [&](const node::member& x) {
      return !x.self && !x.record.draining && x.record.holds(m.model);
    });
    if (held) {
      ++out.elsewhere;
      continue;
    }
    in.model = m.model;
    in.request = {m.bytes, 1.0};
    auto d = i.place(in, 0, {});  // on no lease: this instance is about to leave
    if (!d) {
      if (i.o.log)
        i.o.log("drain: cannot place " + m.model + " through etcd: " + d.error().to_string());
      ++out.unplaced;
      continue;
    }
    if (d->what == action::follow) {  // another instance placed it meanwhile
      ++out.elsewhere;
      continue;
    }
    if (d->what != action::claim || d->self) {
      ++out.unplaced;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(w->mutex);
      ++w->outstanding;
    }
    i.o.peers->ensure(d->address, m.model, [w](expected<void> r) {
      std::lock_guard<std::mutex> lock(w->mutex);
      --w->outstanding;
      if (r) ++w->loaded;
      w->done.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(w->mutex);
  w->done.wait_until(lock, deadline, [&] { return w->outstanding == 0; });
  out.loaded = w->loaded;
  out.failed = models.size() - out.loaded - out.elsewhere - out.unplaced;
  return out;
}

expected<placer::copies_read> placer::copies_of(const std::string& model) {
  auto key = node::copies_key(impl_->o.root, model);
  auto kv = impl_->o.etcd->get(key);
  if (!kv) return std::move(kv).error();
  copies_read out;
  if (!*kv) return out;
  out.revision = (*kv)->mod_revision;
  if (auto change = node::decode_copies(key, (*kv)->value))
    out.last = std::move(*change);
  else
    impl_->warn(change.error().message + " (overwritten by the next change)");
  return out;
}

std::size_t placer::add_copies(const std::string& model, std::uint64_t bytes, std::size_t count,
                               const copies_basis& basis) {
  auto& i = *impl_;
  auto membership = i.o.membership->status();
  node::placement_inputs in;
  in.members = i.members_now(membership);
  in.claim_life_ms = i.o.claim_life.count();
  in.model = model;
  in.request = {bytes, 1.0};
  in.excluded.push_back(i.o.instance);
  for (const auto& m : in.members)
    if (m.record.holds(model) || m.record.is_loading(model)) in.excluded.push_back(m.record.name);
  std::vector<node::known_failure> known;
  {
    std::lock_guard<std::mutex> lock(i.mutex);
    known = i.seen_failures;  // not yet in etcd, perhaps
  }
  const auto now = now_unix_ms();
  impl::guard g{node::copies_key(i.o.root, model), basis.revision,
                node::encode(node::copies_change{basis.copies + static_cast<std::uint32_t>(count),
                                                 i.o.instance, now})};
  std::size_t asked = 0;
  bool guarded = false;  // the first claim made writes the copies change
  using action = node::placement_decision::action;
  for (std::size_t n = 0; n < count; ++n) {
    auto d = i.place(in, membership.lease, known, guarded ? nullptr : &g);
    if (!d) {
      if (d.error().message != "changed")
        i.warn("copies: cannot place a copy of " + model +
               " through etcd: " + d.error().to_string());
      break;  // another holder changed the copies first: its change stands
    }
    if (d->what == action::follow) {  // a copy loading there already (another placement's)
      in.excluded.push_back(d->instance);
      ++asked;
      continue;
    }
    if (d->what != action::claim || d->self) break;  // nowhere else to go
    guarded = true;
    in.excluded.push_back(d->instance);
    ++asked;
    i.o.peers->ensure(
        d->address, model, [log = i.o.log, model, to = d->instance](expected<void> r) {
          if (!r && log)
            log("copies: a copy of " + model + " on " + to + " failed: " + r.error().to_string());
        });
  }
  return asked;
}

bool placer::drop_copy(const std::string& model, const copies_basis& basis) {
  auto& i = *impl_;
  const auto lease = i.o.membership->status().lease;
  node::copies_change change{basis.copies > 0 ? basis.copies - 1 : 0, i.o.instance, now_unix_ms()};
  auto key = node::copies_key(i.o.root, model);
  auto t = i.o.etcd->transact({{key, basis.revision}}, {{key, node::encode(change), lease}});
  if (!t) {
    i.warn("copies: cannot record dropping the copy of " + model +
           " here: " + t.error().to_string());
    return false;
  }
  if (!t->succeeded) return false;
  ++i.drops;
  return true;
}

void placer::adopt(std::vector<std::string> models) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->stopping) return;
  for (auto& m : models)
    impl_->orphans.push_back(std::move(m));
  impl_->went = true;
  impl_->wake.notify_one();
}

std::uint64_t placer::adopted() const {
  return impl_->adoptions;
}
std::uint64_t placer::transitions_resumed() const {
  return impl_->transitions;
}

void placer::set_draining() {
  impl_->draining = true;
}

expected<std::unique_ptr<placer>> placer::start(options o) {
  if (!o.etcd || !o.rt || !o.membership || !o.peers)
    return make_error(errc::invalid_argument,
                      "placement needs etcd, the runtime, the membership and the peers");
  auto i = std::make_unique<impl>();
  i->o = std::move(o);
  auto* raw = i.get();
  i->hook->owner = raw;
  // Loads that fail here are recorded for the other instances (through the hook: events may
  // still arrive while the placer goes).
  i->watch = raw->o.rt->watch([hook = i->hook](const model_event& e) {
    if (e.state != model_state::loading_failed || !e.error) return;
    std::lock_guard<std::mutex> lock(hook->mutex);
    if (hook->owner) hook->owner->load_failed(e.model, *e.error);
  });
  i->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<placer>(new placer(std::move(i)));
}

placer::placer(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

placer::~placer() {
  impl_->o.rt->unwatch(impl_->watch);
  {
    std::lock_guard<std::mutex> lock(impl_->hook->mutex);
    impl_->hook->owner = nullptr;  // answers and events from now on are not taken
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
}

void placer::place(const std::string& model, infer_request request, callback<infer_result> done) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (!impl_->stopping) {
      impl_->queued[model].push_back({std::move(request), std::move(done)});
      impl_->wake.notify_one();
      return;
    }
  }
  request.forwarded = true;
  impl_->o.rt->infer(std::move(request), std::move(done));
}

std::uint64_t placer::placements() const {
  return impl_->placements;
}
std::uint64_t placer::claims_lost() const {
  return impl_->lost;
}
std::uint64_t placer::copies_dropped() const {
  return impl_->drops;
}

}  // namespace warm::warmd
