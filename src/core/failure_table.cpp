#include "core/failure_table.hpp"

#include <algorithm>

namespace warm {

void failure_table::record(const std::string& model, const std::string& device, timestamp now,
                           warm::error error) {
  if (now >= next_sweep_) {
    expire(now);
    next_sweep_ = now + expiry_ / 4;
  }
  records_[model][device] = failure_record{model, device, now, now + expiry_, std::move(error)};
}

void failure_table::record(const std::string& model, const std::string& device, timestamp now,
                           warm::error error, std::chrono::nanoseconds lasting) {
  record(model, device, now, std::move(error));
  records_[model][device].expires =
      now + std::max(lasting, std::chrono::nanoseconds(std::chrono::milliseconds(1)));
}

bool failure_table::eligible(const std::string& model, const std::string& device,
                             timestamp now) const {
  auto m = records_.find(model);
  if (m == records_.end()) return true;
  auto d = m->second.find(device);
  return d == m->second.end() || d->second.expires <= now;
}

std::optional<std::string> failure_table::first_eligible(const std::string& model,
                                                         const std::vector<std::string>& devices,
                                                         timestamp now) const {
  for (const auto& d : devices)
    if (eligible(model, d, now)) return d;
  return std::nullopt;
}

std::optional<failure_record> failure_table::latest(const std::string& model, timestamp now) const {
  auto m = records_.find(model);
  if (m == records_.end()) return std::nullopt;
  const failure_record* best = nullptr;
  for (const auto& [device, r] : m->second)
    if (r.expires > now && (!best || r.when > best->when)) best = &r;
  if (!best) return std::nullopt;
  return *best;
}

void failure_table::clear(const std::string& model) {
  records_.erase(model);
}

std::size_t failure_table::expire(timestamp now) {
  std::size_t dropped = 0;
  for (auto m = records_.begin(); m != records_.end();) {
    for (auto d = m->second.begin(); d != m->second.end();) {
      if (d->second.expires <= now) {
        d = m->second.erase(d);
        ++dropped;
      } else {
        ++d;
      }
    }
    m = m->second.empty() ? records_.erase(m) : std::next(m);
  }
  return dropped;
}

std::vector<failure_record> failure_table::snapshot(timestamp now) const {
  std::vector<failure_record> out;
  for (const auto& [model, devices] : records_)
    for (const auto& [device, r] : devices)
      if (r.expires > now) out.push_back(r);
  return out;
}

std::size_t failure_table::size() const {
  std::size_t n = 0;
  for (const auto& [model, devices] : records_)
    n += devices.size();
  return n;
}

timestamp failure_table::next_expiry(const std::string& model, timestamp now) const {
  auto m = records_.find(model);
  if (m == records_.end()) return now;
  std::optional<timestamp> earliest;
  for (auto& [device, r] : m->second)
    if (r.expires > now && (!earliest || r.expires < *earliest)) earliest = r.expires;
  return earliest.value_or(now);
}

}  // namespace warm
