#include "cluster/miss_placement.hpp"

#include <algorithm>

namespace warm::cluster {
namespace {

const member* find_member(const std::vector<member>& members, const std::string& name) {
  for (const auto& m : members)
    if (m.record.name == name) return &m;
  return nullptr;
}

bool failed_on(const placement_inputs& in, const std::string& instance) {
  return std::any_of(in.failures.begin(), in.failures.end(), [&](const known_failure& f) {
    return f.model == in.model && f.instance == instance &&
           in.now_unix_ms - f.failed_unix_ms < in.failure_life_ms;
  });
}

bool excluded(const placement_inputs& in, const std::string& instance) {
  return std::find(in.excluded.begin(), in.excluded.end(), instance) != in.excluded.end();
}

}  // namespace

bool claim_is_live(const known_claim& c, const std::vector<member>& members,
                   std::int64_t now_unix_ms, std::int64_t claim_life_ms) {
  if (now_unix_ms - c.claim.claimed_unix_ms >= claim_life_ms) return false;
  const member* m = find_member(members, c.claim.instance);
  return m && !m->record.draining;
}

placement_decision decide_placement(const placement_inputs& in) {
  placement_decision out;
  const known_claim* existing = nullptr;
  for (const auto& c : in.claims)
    if (c.model == in.model) existing = &c;
  if (existing && claim_is_live(*existing, in.members, in.now_unix_ms, in.claim_life_ms) &&
      !failed_on(in, existing->claim.instance) && !excluded(in, existing->claim.instance)) {
    const member* m = find_member(in.members, existing->claim.instance);
    if (m->self) return out;  // serve_here: this instance is loading it
    out.what = placement_decision::action::follow;
    out.instance = m->record.name;
    out.address = m->record.address;
    return out;
  }

  std::vector<ranking::instance_view> views;
  views.reserve(in.members.size());
  for (const auto& m : in.members) {
    auto v = view_of(m.record);
    v.tier_holds = m.record.tier_holds(in.model);
    if (failed_on(in, m.record.name) || excluded(in, m.record.name))
      v.draining = true;  // no candidate
    for (const auto& c : in.claims) {
      if (c.claim.instance != m.record.name || c.mod_revision <= m.mod_revision ||
          c.model == in.model)
        continue;
      if (m.record.holds(c.model) ||
          !claim_is_live(c, in.members, in.now_unix_ms, in.claim_life_ms))
        continue;
      v.reserved += c.claim.bytes;
      ++v.reserved_loads;
    }
    views.push_back(std::move(v));
  }
  auto ranked = ranking::rank_instances(views, in.request, ranking::placement_rule::warm);
  if (ranked.empty()) return out;
  const member& chosen = in.members[ranked.front()];
  out.what = placement_decision::action::claim;
  out.instance = chosen.record.name;
  out.address = chosen.record.address;
  out.self = chosen.self;
  out.expected_revision = existing ? existing->mod_revision : 0;
  auto placed = in.placed_revisions.find(chosen.record.name);
  out.placed_revision = placed == in.placed_revisions.end() ? 0 : placed->second;
  return out;
}

const holder* choose_holder(
    const std::vector<holder>& holders,
    const std::function<std::uint32_t(const std::string& address)>& requests) {
  std::size_t eligible = 0;
  for (const auto& h : holders)
    eligible += !h.self && !h.draining;
  const holder* best = nullptr;
  std::uint32_t best_requests = 0;
  for (const auto& h : holders) {
    if (h.self || h.draining) continue;
    const auto in_flight = eligible > 1 ? requests(h.address) : 0;
    if (!best || in_flight < best_requests ||
        (in_flight == best_requests && h.loads_in_flight < best->loads_in_flight)) {
      best = &h;
      best_requests = in_flight;
    }
  }
  return best;
}

}  // namespace warm::cluster
