#include "policy/kdf_tuner.hpp"

#include "policy/kdf_policy.hpp"

namespace warm {

kdf_tuner::kdf_tuner(const policy_options& options) : capacity_(options.capacity) {
  for (double memory : memories) {
    auto fixed = options;
    fixed.kdf_memory = memory;
    shadow s;
    s.memory = memory;
    s.policy = std::make_unique<kdf_policy>(fixed);
    shadows_.push_back(std::move(s));
  }
}

kdf_tuner::~kdf_tuner() = default;

std::uint64_t kdf_tuner::hash(const std::string& model) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : model)
    h = (h ^ c) * 1099511628211ull;
  // FNV's low bits mix better than its high ones; fold them up so the top bits decide.
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

bool kdf_tuner::sampled(const std::string& model) const {
  return share_shift_ == 0 || (hash(model) >> (64 - share_shift_)) == 0;
}

double kdf_tuner::sampled_share() const {
  return 1.0 / static_cast<double>(1ull << share_shift_);
}

void kdf_tuner::set_capacity(std::uint64_t bytes) {
  capacity_ = bytes;
}

void kdf_tuner::on_residents(std::size_t residents) {
  if (residents <= (sampled_residents << share_shift_) || share_shift_ >= 32) return;
  ++share_shift_;
  // Models outside the smaller sample leave every shadow; the shadows' capacity halves with it,
  // and their next misses evict down to it.
  for (auto& s : shadows_)
    for (auto& model : s.policy->resident_models())
      if (!sampled(model)) {
        s.bytes -= s.policy->bytes_of(model);
        s.policy->on_remove(model, false);
      }
}

void kdf_tuner::on_request(const std::string& model, std::uint64_t bytes, double load_seconds,
                           timestamp now, std::uint64_t count) {
  if (capacity_ == 0 || !sampled(model)) return;
  for (auto& s : shadows_)
    request(s, model, bytes, load_seconds, now, count);
  if (++requests_ >= half_life) {
    requests_ = 0;
    for (auto& s : shadows_)
      s.cost /= 2;
  }
  choose_leader();
}

void kdf_tuner::request(shadow& s, const std::string& model, std::uint64_t bytes,
                        double load_seconds, timestamp now, std::uint64_t count) {
  if (s.policy->use_if_resident(model, now, count)) return;
  s.cost += load_seconds;
  const std::uint64_t capacity = capacity_ >> share_shift_;
  if (bytes > capacity) return;  // never fits this shadow: a miss each time
  if (s.bytes + bytes > capacity) {
    auto none = [](const std::string&) { return false; };
    for (auto& victim : s.policy->choose_victims(model, s.bytes + bytes - capacity, none, now)) {
      s.bytes -= s.policy->bytes_of(victim);
      s.policy->on_remove(victim, true);
    }
    if (s.bytes + bytes > capacity) return;
  }
  s.policy->on_insert(model, bytes, load_seconds, now);
  if (count > 1) s.policy->on_access(model, now, count - 1);
  s.bytes += bytes;
}

void kdf_tuner::choose_leader() {
  std::size_t best = leader_;
  for (std::size_t i = 0; i < shadows_.size(); ++i)
    if (shadows_[i].cost < shadows_[best].cost) best = i;
  if (shadows_[best].cost < (1 - switch_margin) * shadows_[leader_].cost) leader_ = best;
}

std::vector<kdf_tuner::shadow_view> kdf_tuner::shadows() const {
  std::vector<shadow_view> out;
  for (auto& s : shadows_)
    out.push_back({s.memory, s.cost, s.policy->size()});
  return out;
}

}  // namespace warm
