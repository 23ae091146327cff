// A request rate as an exponentially weighted moving average of a counter sampled at irregular
// times: rate += (1 - e^(-dt/tau)) · (Δcount/dt - rate). Samples may come from whoever looks
// (a use, a status query), so a model whose hits never reach its actor still gets a fair rate.
// Pure logic, time from the caller.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

#include "warm/clock.hpp"

namespace warm {

class rate_meter {
 public:
  // `tau`: the averaging time constant (how fast old traffic is forgotten). Must be positive.
  explicit rate_meter(std::chrono::duration<double> tau = std::chrono::seconds(60))
      : tau_(tau.count()) {}

  // Records that the counter read `count` at `now`. The first sample only sets the origin.
  void sample(std::uint64_t count, timestamp now) {
    if (!started_) {
      started_ = true;
      last_count_ = count;
      last_ = now;
      return;
    }
    double dt = std::chrono::duration<double>(now - last_).count();
    if (dt <= 0) return;  // same instant: fold into the next sample
    double instant = static_cast<double>(count - last_count_) / dt;
    rate_ += (1 - std::exp(-dt / tau_)) * (instant - rate_);
    last_count_ = count;
    last_ = now;
  }

  // Events per second as of the last sample.
  double per_second() const { return rate_; }

 private:
  double tau_;
  bool started_ = false;
  std::uint64_t last_count_ = 0;
  timestamp last_{};
  double rate_ = 0;
};

}  // namespace warm
