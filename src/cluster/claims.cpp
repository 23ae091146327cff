#include "cluster/claims.hpp"

namespace warm::cluster {

bool instance_failure(errc code) {
  return code == errc::load_failed || code == errc::capacity_exhausted ||
         code == errc::model_too_large;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void throttled_log::operator()(const std::string& line) {
  auto now = std::chrono::steady_clock::now();
  if (!log_ || (last_.time_since_epoch().count() != 0 && now - last_ < std::chrono::seconds(30)))
    return;
  last_ = now;
  log_(line);
}

std::vector<member> members_now(membership_status& status, bool draining) {
  auto members = std::move(status.members);
  if (draining)
    for (auto& m : members)
      if (m.self) m.record.draining = true;
  return members;
}

placement_claims::placement_claims(options o) : o_(std::move(o)) {}

void placement_claims::warn(const std::string& line) const {
  if (o_.warn) o_.warn(line);
}

expected<void> placement_claims::read_placement(placement_inputs& in,
                                                const std::vector<known_failure>& known) {
  auto listed = o_.store->get_prefix(placement_prefix(o_.root));
  if (!listed) return std::move(listed).error();
  const auto claims = claims_prefix(o_.root), placed = placed_prefix(o_.root),
             failures = failures_prefix(o_.root);
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
      auto f = decode_failure(kv.key, kv.value);
      if (slash == std::string::npos || !f) continue;
      in.failures.push_back({rest.substr(0, slash), rest.substr(slash + 1), f->failed_unix_ms});
      continue;
    }
    if (kv.key.rfind(claims, 0) != 0) continue;
    auto claim = decode_claim(kv.key, kv.value);
    if (!claim) {
      warn(claim.error().message);
      continue;
    }
    in.claims.push_back({kv.key.substr(claims.size()), std::move(*claim), kv.mod_revision});
  }
  return {};
}

expected<placement_decision> placement_claims::place(placement_inputs& in, std::int64_t lease,
                                                     const std::vector<known_failure>& known,
                                                     const guard* g) {
  using action = placement_decision::action;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (auto r = read_placement(in, known); !r) return std::move(r).error();
    in.now_unix_ms = now_unix_ms();
    auto d = decide_placement(in);
    if (d.what != action::claim) return d;
    placement_claim claim{d.instance, o_.instance, in.request.bytes, in.now_unix_ms};
    std::vector<etcd::txn_condition> conditions{
        {claim_key(o_.root, in.model), d.expected_revision},
        {placed_key(o_.root, d.instance), d.placed_revision}};
    std::vector<etcd::txn_write> writes{{conditions[0].key, encode(claim), lease},
                                        {conditions[1].key, encode_placed(in.model), lease}};
    if (g) {
      conditions.push_back({g->key, g->revision});
      writes.push_back({g->key, g->value, lease});
    }
    auto t = o_.store->transact(conditions, writes);
    if (!t) return std::move(t).error();
    if (t->succeeded) {
      ++o_.counters->placements;
      return d;
    }
    if (g && t->current.size() == 3 &&
        (t->current[2] ? t->current[2]->mod_revision : 0) != g->revision)
      return make_error(errc::invalid_argument, "changed");
    // The model itself was claimed meanwhile (usually followed after the next read), or only the
    // instance took another placement (decided again with its reservation).
    if (!t->current.empty() && t->current[0] && t->current[0]->mod_revision != d.expected_revision)
      ++o_.counters->claims_lost;
  }
  return placement_decision{};
}

void placement_claims::record_failure(const std::string& model, const std::string& instance,
                                      const error& why, std::int64_t lease) {
  placement_failure record{why.to_string(), now_unix_ms()};
  if (auto r = o_.store->put(failure_key(o_.root, model, instance), encode(record), lease); !r)
    warn("placement: cannot record the failed load of " + model + " on " + instance + ": " +
         r.error().to_string());
}

expected<placement_claims::copies_read> placement_claims::copies_of(const std::string& model) {
  auto key = copies_key(o_.root, model);
  auto kv = o_.store->get(key);
  if (!kv) return std::move(kv).error();
  copies_read out;
  if (!*kv) return out;
  out.revision = (*kv)->mod_revision;
  if (auto change = decode_copies(key, (*kv)->value))
    out.last = std::move(*change);
  else
    warn(change.error().message + " (overwritten by the next change)");
  return out;
}

placement_claims::guard placement_claims::copies_guard(const std::string& model,
                                                       const copies_basis& basis,
                                                       std::size_t count) const {
  return {copies_key(o_.root, model), basis.revision,
          encode(copies_change{basis.copies + static_cast<std::uint32_t>(count), o_.instance,
                               now_unix_ms()})};
}

bool placement_claims::drop_copy(const std::string& model, const copies_basis& basis,
                                 std::int64_t lease) {
  copies_change change{basis.copies > 0 ? basis.copies - 1 : 0, o_.instance, now_unix_ms()};
  auto key = copies_key(o_.root, model);
  auto t = o_.store->transact({{key, basis.revision}}, {{key, encode(change), lease}});
  if (!t) {
    warn("copies: cannot record dropping the copy of " + model + " here: " + t.error().to_string());
    return false;
  }
  if (!t->succeeded) return false;
  ++o_.counters->copies_dropped;
  return true;
}

std::unique_ptr<placement_claims> claims_warning_to(placement_claims::options o,
                                                    throttled_log& warn) {
  o.warn = [&warn](const std::string& line) { warn(line); };
  return std::make_unique<placement_claims>(std::move(o));
}

}  // namespace warm::cluster
