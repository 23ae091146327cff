#include "policy/expert_policy.hpp"

#include <cmath>

namespace warm {

std::vector<expert_policy::expert_spec> expert_policy::default_experts(
    const policy_options& options) {
  std::vector<expert_spec> experts;
  for (double tau : {300.0, 1200.0, 0.0})
    for (double horizon : {0.0, 0.2}) {
      auto o = options;
      o.kdf_tau = std::chrono::duration<double>(tau);
      o.kdf_horizon = horizon;
      char label[64];
      std::snprintf(label, sizeof label, "kdf(%s,%g)",
                    tau > 0 ? (std::to_string(static_cast<int>(tau)) + "s").c_str() : "no decay",
                    horizon);
      experts.push_back({label, "kdf", o});
    }
  return experts;
}

expert_policy::expert_policy(const policy_options& options, std::vector<expert_spec> specs)
    : capacity_(options.capacity), window_(options.kdf_window.count()) {
  for (auto& spec : specs) {
    auto real = make_policy(spec.policy, spec.options);
    auto shadow = make_policy(spec.policy, spec.options);
    if (!real || !shadow) continue;  // default_experts only names known policies
    experts_.push_back({spec, std::move(*real), std::move(*shadow), {}, 0, 0, {}});
  }
}

double expert_policy::cost_at(const expert& e, timestamp now) const {
  double dt = std::chrono::duration<double>(now - e.cost_at).count();
  return dt <= 0 ? e.cost : e.cost * std::exp(-dt / window_);
}

const expert_policy::expert& expert_policy::best(timestamp now) const {
  const expert* leader = &experts_.front();
  for (auto& e : experts_)
    if (cost_at(e, now) < cost_at(*leader, now)) leader = &e;  // ties: the earlier expert
  return *leader;
}

const std::string& expert_policy::leader(timestamp now) const {
  return best(now).spec.label;
}

void expert_policy::shadow_request(expert& e, const std::string& model, timestamp now,
                                   std::uint64_t count) {
  if (e.shadow_residents.count(model)) {
    e.shadow->on_access(model, now, count);
    return;
  }
  const auto& info = known_.at(model);
  e.cost = cost_at(e, now) + info.load_seconds;
  e.cost_at = std::max(e.cost_at, now);
  if (capacity_ && e.shadow_bytes + info.bytes > capacity_) {
    auto none = [](const std::string&) { return false; };
    for (auto& victim :
         e.shadow->choose_victims(model, e.shadow_bytes + info.bytes - capacity_, none, now)) {
      e.shadow->on_remove(victim, true);
      e.shadow_residents.erase(victim);
      e.shadow_bytes -= known_.at(victim).bytes;
    }
  }
  e.shadow->on_insert(model, info.bytes, info.load_seconds, now);
  e.shadow_residents.insert(model);
  e.shadow_bytes += info.bytes;
}

void expert_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                              timestamp now) {
  known_[model] = {bytes, load_seconds};
  ++resident_;
  for (auto& e : experts_) {
    e.real->on_insert(model, bytes, load_seconds, now);
    shadow_request(e, model, now, 1);
  }
}

void expert_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  if (!known_.count(model)) return;
  for (auto& e : experts_) {
    e.real->on_access(model, now, count);
    shadow_request(e, model, now, count);
  }
}

void expert_policy::on_remove(const std::string& model, bool evicted) {
  if (resident_ > 0) --resident_;
  for (auto& e : experts_)
    e.real->on_remove(model, evicted);
}

std::vector<std::string> expert_policy::choose_victims(const std::string& incoming,
                                                       std::uint64_t bytes, const pinned_fn& pinned,
                                                       timestamp now) {
  // Only the leader's ranking is used; the others keep their own state from the events.
  return const_cast<cache_policy&>(*best(now).real).choose_victims(incoming, bytes, pinned, now);
}

}  // namespace warm
