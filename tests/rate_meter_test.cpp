// The EWMA request rate: converges to a steady rate, forgets old traffic, ignores zero-length gaps.
#include <catch2/catch.hpp>

#include "core/rate_meter.hpp"

using namespace std::chrono_literals;

TEST_CASE(
    "a steady rate is learned whatever the sampling pattern, and forgotten when traffic stops") {
  warm::rate_meter meter(10s);
  warm::timestamp t{};
  std::uint64_t count = 0;
  meter.sample(count, t);
  for (int i = 0; i < 600; ++i) {  // 10 events/s, sampled every 0.1..0.5 s
    auto dt = std::chrono::milliseconds(100 + 100 * (i % 5));
    t += dt;
    count += 10 * dt.count() / 1000;
    meter.sample(count, t);
  }
  CHECK(meter.per_second() == Approx(10).epsilon(0.02));
  meter.sample(count, t);  // same instant: no change
  CHECK(meter.per_second() == Approx(10).epsilon(0.02));
  t += 30s;  // three time constants without traffic
  meter.sample(count, t);
  CHECK(meter.per_second() == Approx(10 * std::exp(-3.0)).epsilon(0.02));
}
