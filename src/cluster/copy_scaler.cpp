#include "cluster/copy_scaler.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "cluster/membership.hpp"
#include "cluster/peers.hpp"

namespace warm::cluster {
namespace {

using steady = std::chrono::steady_clock;

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now().time_since_epoch())
      .count();
}

struct scaler_state {
  copy_scaler_config config;
  std::unique_ptr<placement_claims> claims;
  throttled_log warn;
  std::unique_ptr<queue_meter> meter;
  std::map<std::string, std::int64_t> not_before;  // steady ms before which a model is not judged
  std::int64_t next_drop_check = 0;
  steady::time_point next_tick{};
};

using self_pointer = copy_scaler_actor::stateful_pointer<scaler_state>;

// Live instances holding `model`, not draining, this one counted (its record may lag).
std::uint32_t copies_of(const std::vector<member>& members, const std::string& model) {
  std::uint32_t n = 1;
  for (const auto& m : members)
    if (!m.self && !m.record.draining && m.record.holds(model)) ++n;
  return n;
}

// Places `count` more copies of `model` (held here), each as a miss would be placed with the
// instances that hold or load it passed over, and asks each chosen instance to load it. The first
// claim also writes the model's copies change, compared against basis.revision: when another
// holder changed the copies since, nothing is placed. Returns the copies asked for (a copy already
// loading on another instance counts).
std::size_t add_copies(scaler_state& s, const std::string& model, std::uint64_t bytes,
                       std::size_t count, const placement_claims::copies_basis& basis) {
  auto membership = s.config.members->status();
  placement_inputs in;
  in.members = members_now(membership, false);
  in.claim_life_ms = s.config.claims.claim_life.count();
  in.model = model;
  in.request = {bytes, 1.0};
  in.excluded.push_back(s.config.claims.instance);
  for (const auto& m : in.members)
    if (m.record.holds(model) || m.record.is_loading(model)) in.excluded.push_back(m.record.name);
  const auto g = s.claims->copies_guard(model, basis, count);
  std::size_t asked = 0;
  bool guarded = false;  // the first claim made writes the copies change
  using action = placement_decision::action;
  for (std::size_t n = 0; n < count; ++n) {
    auto d = s.claims->place(in, membership.lease, {}, guarded ? nullptr : &g);
    if (!d) {
      if (d.error().message != "changed")
        s.warn("copies: cannot place a copy of " + model +
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
    s.config.peers->ensure(
        d->address, model, [log = s.config.log, model, to = d->instance](expected<void> r) {
          if (!r && log)
            log("copies: a copy of " + model + " on " + to + " failed: " + r.error().to_string());
        });
  }
  return asked;
}

void judge(scaler_state& s, const std::string& model, std::uint64_t size,
           const std::vector<member>& members, bool full, std::int64_t now) {
  const auto& rule = s.config.rule;
  if (auto it = s.not_before.find(model); it != s.not_before.end() && now < it->second) return;
  auto read = s.claims->copies_of(model);
  if (!read) {
    s.not_before[model] = now + 1000;
    return;
  }
  copy_view v;
  v.copies = copies_of(members, model);
  for (const auto& m : members)
    if (!m.self && !m.record.draining && !m.record.holds(model) && !m.record.is_loading(model))
      ++v.room;
  v.recent = s.meter->mean(model, rule.sustain_ms);
  v.slow = s.meter->mean(model, rule.cool_ms);
  v.last_change_ms = read->last ? read->last->changed_unix_ms : 0;
  v.cluster_full = full;
  v.now_ms = now_unix_ms();
  const int change = decide_copies(rule, v);
  if (change == 0) {
    // Within the settle time: not again before it ends (no etcd read every tick).
    const auto settled = v.last_change_ms + rule.settle_ms - v.now_ms;
    s.not_before[model] = now + std::clamp<std::int64_t>(settled, 250, rule.settle_ms);
    return;
  }
  s.not_before[model] = now + rule.settle_ms;
  placement_claims::copies_basis basis{read->revision, v.copies};
  if (change > 0) {
    auto asked = add_copies(s, model, size, static_cast<std::size_t>(change), basis);
    s.config.claims.counters->copies_added += asked;
    if (asked > 0 && s.config.note)
      s.config.note(
          fmt::format("copies: {} queues {:.1f} requests per copy ({} cop{}); {} more asked for",
                      model, *v.recent, v.copies, v.copies == 1 ? "y" : "ies", asked));
    return;
  }
  if (!s.claims->drop_copy(model, basis, s.config.members->status().lease)) return;
  if (s.config.note)
    s.config.note(
        fmt::format("copies: the cluster is full and {} cooled; dropping its copy here ({} left)",
                    model, v.copies - 1));
  s.config.unload(model, [log = s.config.log, model](expected<void> r) {
    if (!r && log)
      log("copies: cannot unload the dropped copy of " + model + ": " + r.error().to_string());
  });
}

// The runtime's inspection, within 2 s (this thread may wait; it is not a scheduler's).
std::optional<inspection> inspect(scaler_state& s) {
  auto answer = std::make_shared<std::promise<expected<inspection>>>();
  auto ready = answer->get_future();
  s.config.inspect([answer](expected<inspection> r) { answer->set_value(std::move(r)); });
  if (ready.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return std::nullopt;
  auto state = ready.get();
  if (!state) return std::nullopt;
  return std::move(*state);
}

void tick(scaler_state& s) {
  const auto& rule = s.config.rule;
  auto state = inspect(s);
  if (!state) return;
  std::vector<std::pair<std::string, std::uint32_t>> resident;
  std::map<std::string, std::uint64_t> bytes;
  for (const auto& d : state->devices)
    for (const auto& r : d.resident) {
      resident.emplace_back(r.model, r.in_flight);
      bytes[r.model] = r.bytes;
    }
  const auto now = steady_ms();
  s.meter->sample(now, resident);
  for (auto it = s.not_before.begin(); it != s.not_before.end();)
    it = bytes.count(it->first) ? std::next(it) : s.not_before.erase(it);

  std::vector<std::string> judged;  // hot ones, then cool ones when the cluster is full
  for (const auto& [model, size] : bytes)
    if (auto q = s.meter->mean(model, rule.sustain_ms); q && *q >= rule.add_queue)
      judged.push_back(model);
  const bool drops = now >= s.next_drop_check;
  if (judged.empty() && !drops) return;
  auto members = s.config.members->members();
  const bool full = cluster_is_full(members, rule.full_fraction);
  if (drops) {
    s.next_drop_check = now + 1000;
    if (full)
      for (const auto& [model, size] : bytes)
        if (copies_of(members, model) >= 2 && s.meter->mean(model, rule.cool_ms))
          judged.push_back(model);
  }
  for (const auto& model : judged)
    judge(s, model, bytes[model], members, full, now);
}

copy_scaler_actor::behavior_type scaler(self_pointer self,
                                        std::shared_ptr<copy_scaler_config> config) {
  auto& s = self->state;
  s.config = std::move(*config);
  s.warn = throttled_log(s.config.log);
  s.claims = claims_warning_to(s.config.claims, s.warn);
  s.meter =
      std::make_unique<queue_meter>(std::max(s.config.rule.sustain_ms, s.config.rule.cool_ms));
  s.next_tick = steady::now() + s.config.tick;
  self->delayed_send(self, s.config.tick, msg::scale_tick{});
  return {
      [=](msg::scale_tick) {
        auto& st = self->state;
        tick(st);
        // On the tick's schedule; a slow tick is not made up for.
        st.next_tick = std::max(st.next_tick + st.config.tick, steady::now());
        auto wait =
            std::chrono::duration_cast<std::chrono::milliseconds>(st.next_tick - steady::now());
        self->delayed_send(self, std::max(wait, std::chrono::milliseconds(0)), msg::scale_tick{});
      },
      [=](msg::stop_scaling) { self->quit(); },
  };
}

}  // namespace

expected<copy_scaler_actor> spawn_copy_scaler(caf::actor_system& system,
                                              copy_scaler_config config) {
  if (auto ok = check_copy_rule(config.rule); !ok) return std::move(ok).error();
  if (config.rule.add_queue <= 0)
    return make_error(errc::invalid_argument, "copies: the rule adds no copies");
  if (!config.claims.store || !config.claims.counters || !config.members || !config.peers ||
      !config.inspect || !config.unload)
    return make_error(errc::invalid_argument,
                      "copies need etcd, counters, the members, the peers and the runtime");
  if (config.tick.count() <= 0)
    return make_error(errc::invalid_argument, "copies: the tick must be positive");
  // Detached: it waits on etcd and on the runtime's inspection.
  return system.spawn<caf::detached>(scaler,
                                     std::make_shared<copy_scaler_config>(std::move(config)));
}

}  // namespace warm::cluster
