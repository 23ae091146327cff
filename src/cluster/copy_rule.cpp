#include "cluster/copy_rule.hpp"

#include <algorithm>
#include <cmath>

namespace warm::cluster {

expected<void> check_copy_rule(const copy_rule& r) {
  if (!(r.add_queue >= 0))
    return make_error(errc::invalid_argument, "copies: add_queue must be 0 or more");
  if (!(r.drop_queue >= 0) || (r.add_queue > 0 && !(r.drop_queue < r.add_queue / 2)))
    return make_error(errc::invalid_argument,
                      "copies: drop_queue must be 0 or more and below add_queue / 2");
  if (r.sustain_ms <= 0 || r.cool_ms <= 0 || r.settle_ms <= 0)
    return make_error(errc::invalid_argument, "copies: sustain, cool and settle must be positive");
  if (!(r.full_fraction > 0 && r.full_fraction <= 1))
    return make_error(errc::invalid_argument, "copies: full_fraction must be in (0, 1]");
  return {};
}

int decide_copies(const copy_rule& rule, const copy_view& v) {
  if (rule.add_queue <= 0 || v.copies == 0) return 0;
  if (v.last_change_ms != 0 && v.now_ms - v.last_change_ms < rule.settle_ms) return 0;
  if (v.recent && *v.recent >= rule.add_queue && v.room > 0) {
    const double load = v.copies * *v.recent;
    const auto wanted = static_cast<std::int64_t>(std::ceil(load / (rule.add_queue / 2)));
    const std::int64_t more = std::clamp<std::int64_t>(wanted - v.copies, 1, v.copies);
    return static_cast<int>(std::min<std::int64_t>(more, v.room));
  }
  if (v.copies >= 2 && v.cluster_full && v.slow &&
      *v.slow * v.copies / (v.copies - 1) < rule.drop_queue)
    return -1;
  return 0;
}

bool cluster_is_full(const std::vector<member>& members, double fraction) {
  double capacity = 0, used = 0;
  for (const auto& m : members) {
    if (m.record.draining) continue;
    for (const auto& d : m.record.devices) {
      capacity += static_cast<double>(d.capacity);
      used += static_cast<double>(std::min(d.used, d.capacity));
    }
  }
  return capacity > 0 && used >= fraction * capacity;
}

void queue_meter::sample(std::int64_t now_ms,
                         const std::vector<std::pair<std::string, std::uint32_t>>& resident) {
  now_ms = std::max(now_ms, last_ms_);
  last_ms_ = now_ms;
  samples_.push_back(now_ms);
  while (!samples_.empty() && samples_.front() <= now_ms - horizon_ms_)
    samples_.pop_front();
  std::map<std::string, std::uint32_t>
      now;  // a model on several devices: one copy, all its requests
  for (const auto& [model, in_flight] : resident)
    now[model] += in_flight;
  std::map<std::string, history> next;
  for (const auto& [model, in_flight] : now) {
    auto found = models_.find(model);
    history h;
    if (found != models_.end())
      h = std::move(found->second);
    else
      h.since_ms = now_ms;
    while (!h.busy.empty() && h.busy.front().first <= now_ms - horizon_ms_)
      h.busy.pop_front();
    if (in_flight > 0) h.busy.emplace_back(now_ms, in_flight);
    next.emplace(model, std::move(h));
  }
  models_ = std::move(next);
}

std::optional<double> queue_meter::mean(const std::string& model, std::int64_t window_ms) const {
  auto found = models_.find(model);
  if (found == models_.end() || window_ms > horizon_ms_) return std::nullopt;
  const auto& h = found->second;
  const std::int64_t from = last_ms_ - window_ms;  // samples after it are in the window
  if (h.since_ms > from) return std::nullopt;
  const auto count =
      std::count_if(samples_.begin(), samples_.end(), [&](std::int64_t t) { return t > from; });
  if (count == 0) return std::nullopt;
  double sum = 0;
  for (const auto& [at, in_flight] : h.busy)
    if (at > from) sum += in_flight;
  return sum / static_cast<double>(count);
}

std::vector<std::string> queue_meter::models() const {
  std::vector<std::string> out;
  out.reserve(models_.size());
  for (const auto& [model, h] : models_)
    out.push_back(model);
  return out;
}

}  // namespace warm::cluster
