#include "cluster/migration.hpp"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "cluster/membership.hpp"
#include "cluster/peers.hpp"

namespace warm::cluster {

migration migrate(placement_claims& claims, const member_view& members, peer_calls& peers,
                  const std::vector<migrant>& models,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void(const std::string&)>& log) {
  migration out;
  auto membership = members.status();
  placement_inputs in;
  in.members = members_now(membership, true);
  in.claim_life_ms = claims.settings().claim_life.count();

  // The answers to the loads asked for: on the peers' thread, counted here.
  struct waiting {
    std::mutex mutex;
    std::condition_variable done;
    std::size_t outstanding = 0, loaded = 0;
  };
  auto w = std::make_shared<waiting>();
  using action = placement_decision::action;
  for (const auto& m : models) {
    auto held = std::any_of(in.members.begin(), in.members.end(), [&](const member& x) {
      return !x.self && !x.record.draining && x.record.holds(m.model);
    });
    if (held) {
      ++out.elsewhere;
      continue;
    }
    in.model = m.model;
    in.request = {m.bytes, 1.0};
    auto d = claims.place(in, 0, {});  // on no lease: this instance is about to leave
    if (!d) {
      if (log) log("drain: cannot place " + m.model + " through etcd: " + d.error().to_string());
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
    peers.ensure(d->address, m.model, [w](expected<void> r) {
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

}  // namespace warm::cluster
