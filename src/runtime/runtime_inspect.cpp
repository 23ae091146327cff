// The runtime's inspection (one snapshot of every actor's state, the disk tier's included) and
// the disk tier's view added to model statuses.
#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
#include <memory>

#include "actors/protocol/device_protocol.hpp"
#include "actors/protocol/loader_pool_protocol.hpp"
#include "actors/protocol/registry_protocol.hpp"
#include "actors/protocol/scorer_protocol.hpp"
#include "actors/protocol/tier_protocol.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/tier_view.hpp"
#include "warm/runtime.hpp"

namespace warm {

using runtime_detail::promised;

namespace runtime_detail {

callback<model_status> with_tier(const tier_actor& tier, callback<model_status> done) {
  return [tier, done = std::move(done)](expected<model_status> st) {
    if (!st || st->source.empty() || !tier) return done(std::move(st));
    auto source = st->source;
    caf::anon_send(tier, msg::inspect_tier{[st = std::move(*st), done](tier_info view) mutable {
                                             mark_tier(st, view);
                                             done(std::move(st));
                                           },
                                           std::move(source)});
  };
}

callback<std::vector<model_status>> with_tier(const tier_actor& tier,
                                              callback<std::vector<model_status>> done) {
  return [tier, done = std::move(done)](expected<std::vector<model_status>> page) {
    const bool remote = page && std::any_of(page->begin(), page->end(), [](const model_status& st) {
                          return !st.source.empty();
                        });
    if (!remote || !tier) return done(std::move(page));
    caf::anon_send(tier, msg::inspect_tier{[page = std::move(*page), done](tier_info view) mutable {
                     mark_tier(page, view);
                     done(std::move(page));
                   }});
  };
}

}  // namespace runtime_detail

// ---- inspection -----------------------------------------------------------------------------

void runtime::inspect(callback<inspection> done) {
  auto& i = *impl_;
  struct partial {
    inspection result;
    std::atomic<std::size_t> remaining;
    callback<inspection> done;
    std::vector<std::pair<std::string, std::string>> sources;  // the registry's remote models
    void arrive() {
      if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      attach_models(result.tier, sources);
      mark_tier(result.models, result.tier);
      done(std::move(result));
    }
  };
  auto p = std::make_shared<partial>();
  p->remaining = 4 + i.device_actors.size() + (i.scorer ? 1 : 0);
  p->done = std::move(done);
  p->result.devices.resize(i.device_actors.size());
  p->result.max_concurrent_loads = i.options.max_concurrent_loads;
  caf::anon_send(i.registry,
                 msg::inspect_models{[p](std::vector<model_status> models, std::uint64_t registered,
                                         std::uint64_t vmodels) {
                   p->result.models = std::move(models);
                   p->result.registered_models = registered;
                   p->result.vmodels = vmodels;
                   p->arrive();
                 }});
  // The tier first, then the models of the files it holds (none asked for when it holds none).
  caf::anon_send(i.tier, msg::inspect_tier{[p, registry = i.registry](tier_info tier) {
                   std::vector<std::string> held;
                   for (const auto& h : tier.held)
                     held.push_back(h.source);
                   std::sort(held.begin(), held.end());
                   p->result.tier = std::move(tier);
                   if (held.empty()) {
                     p->arrive();
                     return p->arrive();
                   }
                   caf::anon_send(
                       registry,
                       msg::model_sources{std::move(held),
                                          [p](std::vector<std::pair<std::string, std::string>> s) {
                                            p->sources = std::move(s);
                                            p->arrive();
                                          }});
                   p->arrive();
                 }});
  caf::anon_send(i.pool, msg::inspect_loads{[p](std::vector<queued_load> queue,
                                                std::vector<running_load> running,
                                                std::vector<failure_info> failures,
                                                std::uint64_t started, std::uint64_t failed) {
                   p->result.queue = std::move(queue);
                   p->result.running = std::move(running);
                   p->result.failures = std::move(failures);
                   p->result.loads_started = started;
                   p->result.loads_failed = failed;
                   p->arrive();
                 }});
  if (i.scorer)
    caf::anon_send(i.scorer, msg::inspect_scorer{[p](std::uint64_t rebuilds, double seconds) {
                     p->result.importance_rebuilds = rebuilds;
                     p->result.importance_rebuild_seconds = seconds;
                     p->arrive();
                   }});
  for (std::size_t d = 0; d < i.device_actors.size(); ++d)
    caf::anon_send(i.device_actors[d], msg::inspect_device{[p, d](expected<device_info> info) {
                     p->result.devices[d] = std::move(*info);
                     p->arrive();
                   }});
}

std::future<expected<inspection>> runtime::inspect() {
  auto [cb, future] = promised<inspection>();
  inspect(std::move(cb));
  return std::move(future);
}

}  // namespace warm
