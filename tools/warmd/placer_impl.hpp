// The placer's state and the work it does on its threads (tools/warmd/placer.hpp has the
// interface): internal to placer.cpp, which defines placer's own methods over it.
#pragma once

#include "placer.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "etcd/client.hpp"
#include "node/etcd_registry.hpp"
#include "node/membership.hpp"
#include "node/placing.hpp"
#include "peers.hpp"
#include "warm/runtime.hpp"

namespace warm::warmd {

// The placer's helpers, shared by placer.cpp alone.
namespace placer_detail {

struct job {
  infer_request request;
  callback<infer_result> done;
  bool retried = false;  // already sent back once by an instance whose load failed
};

// Errors of a load that another instance may not have: its device, its copy of the file.
inline bool instance_failure(errc code) {
  return code == errc::load_failed || code == errc::capacity_exhausted ||
         code == errc::model_too_large;
}

// How long a failed load keeps placement away from its instance (ModelMesh's failure expiry).
constexpr std::int64_t failure_life_ms = 15 * 60 * 1000;

inline std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace placer_detail
using namespace placer_detail;

// How a forward's answer (on the peer client's thread) and the runtime's events reach the placer:
// they can arrive after the placer is gone, which clears `owner`.
struct retry_hook {
  std::mutex mutex;
  placer::impl* owner = nullptr;
};

struct placer::impl {
  options o;
  std::atomic<std::uint64_t> placements{0}, lost{0}, drops{0}, adoptions{0}, transitions{0};
  std::atomic<bool> draining{false};
  std::shared_ptr<retry_hook> hook = std::make_shared<retry_hook>();
  std::uint64_t watch = 0;  // the runtime's events

  std::mutex mutex;
  std::condition_variable wake;
  std::map<std::string, std::vector<job>> queued;  // by model
  struct failed_load {
    std::string model, instance;
    error why;
  };
  std::vector<failed_load> failed_loads;  // to record in etcd: here, or answered by a peer
  std::vector<std::string> orphans;       // hot models of an instance that went (adopt)
  bool went = false;                      // an instance went since the placement thread last looked
  std::vector<node::known_failure> seen_failures;  // answers from peers whose load failed
  bool stopping = false;
  std::thread thread;  // last: started once the rest is ready

  std::mutex warning_mutex;
  std::chrono::steady_clock::time_point last_warning{};  // under warning_mutex

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queued.empty() || !failed_loads.empty() || went; });
      if (stopping) break;
      auto batch = std::move(queued);
      queued.clear();
      auto failures = std::move(failed_loads);
      failed_loads.clear();
      auto adopting = std::move(orphans);
      orphans.clear();
      const bool someone_went = std::exchange(went, false);
      lock.unlock();
      for (const auto& f : failures)
        record_failure(f);
      for (auto& [model, jobs] : batch)
        decide(model, std::move(jobs));
      if (someone_went && adopter()) {
        for (const auto& model : adopting)
          adopt(model);
        resume_transitions();
      }
      lock.lock();
    }
    auto rest = std::move(queued);
    lock.unlock();
    for (auto& [model, jobs] : rest)
      serve_here(std::move(jobs));
  }

  void serve_here(std::vector<job> jobs) {
    for (auto& j : jobs) {
      j.request.forwarded = true;  // loaded here; the miss handler does not see it again
      o.rt->infer(std::move(j.request), std::move(j.done));
    }
  }

  // Sends the jobs to `instance`, which placement chose to load the model. When its load fails
  // there, each job comes back (once) to be placed again without that instance.
  void forward(const std::string& model, const std::string& instance, const std::string& address,
               std::vector<job> jobs) {
    for (auto& j : jobs) {
      if (j.retried) {
        o.peers->infer(address, std::move(j.request), std::move(j.done));
        continue;
      }
      auto again = std::make_shared<job>(job{j.request, nullptr, true});  // a copy, for the retry
      o.peers->infer(address, std::move(j.request),
                     [hook = hook, model, instance, again,
                      done = std::move(j.done)](expected<infer_result> r) mutable {
                       if (r || !instance_failure(r.error().code)) return done(std::move(r));
                       std::lock_guard<std::mutex> lock(hook->mutex);
                       if (!hook->owner) return done(std::move(r));
                       again->done = std::move(done);
                       hook->owner->retry(model, instance, r.error(), std::move(*again));
                     });
    }
  }

  // A load of `model` failed here (the runtime's event): recorded in etcd, on this instance's
  // lease, so that placement passes this instance over for the model while it lives.
  void load_failed(const std::string& model, const error& e) {
    std::lock_guard<std::mutex> lock(mutex);
    failed_loads.push_back({model, o.instance, e});
    wake.notify_one();
  }

  // A job whose load failed on `instance` (answered `why`): placed again, that instance passed
  // over, and the failure recorded for the other instances.
  void retry(const std::string& model, const std::string& instance, const error& why, job j) {
    std::lock_guard<std::mutex> lock(mutex);
    seen_failures.push_back({model, instance, now_unix_ms()});
    failed_loads.push_back({model, instance, why});
    queued[model].push_back(std::move(j));
    wake.notify_one();
  }

  // Records a failed load in etcd, on this instance's lease: every instance's placement passes
  // that instance over for the model while the record lives.
  void record_failure(const failed_load& f) {
    node::placement_failure record{f.why.to_string(), now_unix_ms()};
    auto lease = o.membership->status().lease;
    if (auto r = o.etcd->put(node::failure_key(o.root, f.model, f.instance), node::encode(record),
                             lease);
        !r)
      warn("placement: cannot record the failed load of " + f.model + " on " + f.instance + ": " +
           r.error().to_string());
  }

  void warn(const std::string& line) {
    auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(warning_mutex);
      if (!o.log || now - last_warning < std::chrono::seconds(30)) return;
      last_warning = now;
    }
    o.log(line);
  }

  // The model's status here, within 2 s (the placement thread may wait; it is not the runtime's).
  expected<model_status> status_of(const std::string& model) {
    auto answer = o.rt->status(model);
    if (answer.wait_for(std::chrono::seconds(2)) != std::future_status::ready)
      return make_error(errc::timeout, "the runtime did not answer a status request within 2 s");
    return answer.get();
  }

  // Reads every claim, placement key and failure into `in` (one etcd read), with the failures
  // this instance knows of besides (`known`: perhaps not in etcd yet).
  expected<void> read_placement(node::placement_inputs& in,
                                const std::vector<node::known_failure>& known) {
    auto listed = o.etcd->get_prefix(node::placement_prefix(o.root));
    if (!listed) return std::move(listed).error();
    const auto claims = node::claims_prefix(o.root), placed = node::placed_prefix(o.root),
               failures = node::failures_prefix(o.root);
    in.claims.clear();
    in.placed_revisions.clear();
    in.failures = known;
    for (const auto& kv : listed->kvs) {
      if (kv.key.rfind(placed, 0) == 0) {
        in.placed_revisions[kv.key.substr(placed.size())] = kv.mod_revision;
        continue;
      }
      if (kv.key.rfind(failures, 0) == 0) {
        auto rest = kv.key.substr(failures.size());
        auto slash = rest.rfind('/');
        auto f = node::decode_failure(kv.key, kv.value);
        if (slash == std::string::npos || !f) continue;
        in.failures.push_back({rest.substr(0, slash), rest.substr(slash + 1), f->failed_unix_ms});
        continue;
      }
      if (kv.key.rfind(claims, 0) != 0) continue;
      auto claim = node::decode_claim(kv.key, kv.value);
      if (!claim) {
        warn(claim.error().message);
        continue;
      }
      in.claims.push_back({kv.key.substr(claims.size()), std::move(*claim), kv.mod_revision});
    }
    return {};
  }

  // Decides where in.model goes and claims it when that is the decision: one transaction on the
  // claim's key and the chosen instance's placement key, tried again on a fresh read when another
  // placement changed either (up to 5 times; then serve_here). What it returns is final:
  // serve_here, follow, or a claim made. Claims and placement keys go on `lease` (0: none).
  // Called on the placement thread, and by migrate() on the draining thread: it touches no state
  // of the placement thread's but the counters.
  // With a guard, the claim's transaction also compares the guard's key with its revision and
  // writes its value; when another writer changed that key meanwhile, the answer is
  // invalid_argument "changed" and nothing is claimed.
  struct guard {
    std::string key;
    std::int64_t revision = 0;
    std::string value;
  };
  expected<node::placement_decision> place(node::placement_inputs& in, std::int64_t lease,
                                           const std::vector<node::known_failure>& known,
                                           const guard* g = nullptr) {
    using action = node::placement_decision::action;
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (auto r = read_placement(in, known); !r) return std::move(r).error();
      in.now_unix_ms = now_unix_ms();
      auto d = node::decide_placement(in);
      if (d.what != action::claim) return d;
      node::placement_claim claim{d.instance, o.instance, in.request.bytes, in.now_unix_ms};
      std::vector<etcd::txn_condition> conditions{
          {node::claim_key(o.root, in.model), d.expected_revision},
          {node::placed_key(o.root, d.instance), d.placed_revision}};
      std::vector<etcd::txn_write> writes{
          {conditions[0].key, node::encode(claim), lease},
          {conditions[1].key, node::encode_placed(in.model), lease}};
      if (g) {
        conditions.push_back({g->key, g->revision});
        writes.push_back({g->key, g->value, lease});
      }
      auto t = o.etcd->transact(conditions, writes);
      if (!t) return std::move(t).error();
      if (t->succeeded) {
        ++placements;
        return d;
      }
      if (g && t->current.size() == 3 &&
          (t->current[2] ? t->current[2]->mod_revision : 0) != g->revision)
        return make_error(errc::invalid_argument, "changed");
      // The model itself was claimed meanwhile (usually followed after the next read), or only
      // the instance took another placement (decided again with its reservation).
      if (!t->current.empty() && t->current[0] &&
          t->current[0]->mod_revision != d.expected_revision)
        ++lost;
    }
    return node::placement_decision{};
  }

  // The members, this instance marked draining once it is (its record may not say so yet).
  std::vector<node::member> members_now(node::membership_status& status) const {
    auto members = std::move(status.members);
    if (draining)
      for (auto& m : members)
        if (m.self) m.record.draining = true;
    return members;
  }

  // What placing `model` (of this status here) starts from; place() reads the rest from etcd.
  node::placement_inputs inputs_for(const std::string& model, const model_status& status,
                                    node::membership_status& membership) const {
    node::placement_inputs in;
    in.members = members_now(membership);
    in.model = model;
    in.request.bytes = status.bytes;
    in.request.load_seconds = status.loads.count > 0 ? status.loads.mean_ms / 1000 : 1.0;
    in.claim_life_ms = o.claim_life.count();
    return in;
  }

  // Failures seen by this instance (its own, and peers' answers), the placement thread's copy.
  std::vector<node::known_failure> local_failures;

  // Takes the failures answered by peers since, and forgets those past their life.
  void refresh_failures() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& f : seen_failures)
        local_failures.push_back(std::move(f));
      seen_failures.clear();
    }
    const auto now = now_unix_ms();
    local_failures.erase(
        std::remove_if(local_failures.begin(), local_failures.end(),
                       [&](const auto& f) { return now - f.failed_unix_ms >= failure_life_ms; }),
        local_failures.end());
  }

  // A hot model of an instance that went, loaded where placement says unless a live instance
  // holds or loads it already.
  // Whether this instance takes over what an instance that went left: the live instance with the
  // lowest name that is not draining (claims would keep a model one load anyway; this keeps it
  // one placement).
  bool adopter() const {
    if (draining) return false;
    for (const auto& m : o.membership->members())
      if (!m.record.draining) return m.self;
    return false;
  }

  // vmodels whose transition is pending in the cluster's registry (active ≠ target): the
  // instance that set one may be the one that went. Set here again (compared against the same
  // target), so that this instance loads the target and flips; when the setter is alive, both
  // flip to the same target.
  void resume_transitions() {
    const auto prefix = node::registry_prefix(o.root);
    auto listed = o.etcd->get_prefix(prefix + "vmodels/");
    if (!listed)
      return warn("placement: cannot read the vmodels to resume their transitions: " +
                  listed.error().to_string());
    for (const auto& kv : listed->kvs) {
      auto change = node::decode_change(prefix, kv.key, kv.value);
      const auto* v = change ? std::get_if<put_vmodel>(&*change) : nullptr;
      if (!v || v->record.active == v->record.target) continue;
      ++transitions;
      o.rt->set_vmodel(v->record.id, v->record.target, false, v->record.target,
                       [log = o.log, id = v->record.id](expected<vmodel_status> r) {
                         if (!r && log)
                           log("placement: cannot resume the transition of vmodel " + id + ": " +
                               r.error().to_string());
                       });
    }
  }

  void adopt(const std::string& model) {
    auto membership = o.membership->status();
    for (const auto& m : membership.members)
      if (!m.record.draining && (m.record.holds(model) || m.record.is_loading(model))) return;
    auto status = status_of(model);
    if (!status ||
        (status->state != model_state::not_loaded && status->state != model_state::loading_failed))
      return;
    refresh_failures();
    auto in = inputs_for(model, *status, membership);
    auto d = place(in, membership.lease, local_failures);
    using action = node::placement_decision::action;
    if (!d)
      return warn("placement: cannot place " + model +
                  " (its instance went) through etcd: " + d.error().to_string());
    if (d->what != action::claim) return;  // followed: another instance adopted it first
    ++adoptions;
    auto logged = [log = o.log, model, to = d->instance](expected<void> r) {
      if (!r && log)
        log("placement: loading " + model + " (its instance went) on " + to +
            " failed: " + r.error().to_string());
    };
    if (d->self)
      o.rt->ensure_loaded(model, false, std::move(logged));
    else
      o.peers->ensure(d->address, model, std::move(logged));
  }

  void decide(const std::string& model, std::vector<job> jobs) {
    refresh_failures();
    const auto now = now_unix_ms();
    auto status = status_of(model);
    if (status && status->state == model_state::loading_failed)  // placed elsewhere, if anywhere
      local_failures.push_back({model, o.instance, now});
    // Not registered, or already loading here: this instance answers as it would alone.
    if (!status ||
        (status->state != model_state::not_loaded && status->state != model_state::loading_failed))
      return serve_here(std::move(jobs));
    auto membership = o.membership->status();
    auto in = inputs_for(model, *status, membership);
    auto d = place(in, membership.lease, local_failures);
    if (!d) {
      warn("placement: cannot place " + model +
           " through etcd, serving it here: " + d.error().to_string());
      return serve_here(std::move(jobs));
    }
    using action = node::placement_decision::action;
    if (d->what == action::serve_here || (d->what == action::claim && d->self))
      return serve_here(std::move(jobs));
    forward(model, d->instance, d->address, std::move(jobs));
  }
};

}  // namespace warm::warmd
