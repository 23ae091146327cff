#include "policy/load_penalty.hpp"

#include <algorithm>
#include <cmath>

namespace warm {

namespace {
constexpr double gb = 1e9;
}

load_penalty::load_penalty(double default_bytes_per_second, double decay)
    : default_bandwidth_(default_bytes_per_second > 0 ? default_bytes_per_second : 1e9),
      decay_(std::clamp(decay, 0.0, 1.0)) {}

void load_penalty::record(const std::string& model, std::uint64_t bytes, double seconds) {
  if (!(seconds > 0) || bytes == 0 || !std::isfinite(seconds)) return;
  auto& m = models_[model];
  ++m.count;
  m.seconds += (seconds - m.seconds) / static_cast<double>(m.count);
  double x = static_cast<double>(bytes) / gb;
  n_ = n_ * decay_ + 1;
  sx_ = sx_ * decay_ + x;
  sy_ = sy_ * decay_ + seconds;
  sxx_ = sxx_ * decay_ + x * x;
  sxy_ = sxy_ * decay_ + x * seconds;
}

double load_penalty::estimate(std::uint64_t bytes) const {
  double x = static_cast<double>(bytes) / gb;
  if (n_ == 0 || sx_ <= 0) return static_cast<double>(bytes) / default_bandwidth_;
  double ratio = sy_ / sx_ * x;  // the mean bandwidth alone
  double spread = sxx_ - sx_ * sx_ / n_;
  if (spread <= 1e-12 * sxx_) return ratio;  // one size seen: no line to fit
  double slope = (sxy_ - sx_ * sy_ / n_) / spread;
  double fixed = (sy_ - slope * sx_) / n_;
  if (slope <= 0 || fixed < 0) return ratio;  // a fit that says bigger loads are free is noise
  return fixed + slope * x;
}

double load_penalty::of(const std::string& model, std::uint64_t bytes) const {
  auto it = models_.find(model);
  return it != models_.end() ? it->second.seconds : estimate(bytes);
}

}  // namespace warm
