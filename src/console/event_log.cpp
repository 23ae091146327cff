#include "console/event_log.hpp"

namespace warm::console {

std::string model_event_kind(const model_event& e) {
  switch (e.state) {
    case model_state::queued:
      return "queued";
    case model_state::loading:
      return "loading";
    case model_state::loaded:
      return "loaded";
    case model_state::loading_failed:
      return "failed";
    case model_state::not_found:
      return "unregistered";
    case model_state::not_loaded:
      if (e.previous == model_state::loaded)
        return e.reason.empty() || e.reason == "unload" ? "unloaded" : "evicted";
      if (e.previous == model_state::loading_failed) return "retry";
      return "cancelled";
  }
  return "changed";
}

event from_model_event(const model_event& e, double unix_seconds) {
  event out;
  out.unix_seconds = unix_seconds;
  out.model = e.model;
  out.kind = model_event_kind(e);
  out.from = std::string(to_string(e.previous));
  out.to = std::string(to_string(e.state));
  out.device = e.device;
  if (out.kind == "evicted") out.reason = e.reason;
  if (e.error) out.error = e.error->message;
  return out;
}

void event_log::add(event e) {
  e.seq = next_++;
  events_.push_back(std::move(e));
  while (events_.size() > capacity_)
    events_.pop_front();
}

std::vector<event> event_log::after(std::uint64_t after, std::size_t max) const {
  std::vector<event> out;
  for (auto it = events_.rbegin(); it != events_.rend() && out.size() < max && it->seq > after;
       ++it)
    out.push_back(*it);
  return out;
}

}  // namespace warm::console
