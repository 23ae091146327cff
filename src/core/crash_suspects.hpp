// Whom to blame when a model runtime dies: the models whose inferences were in flight then.
// Pure logic with the time passed in (tests use a fake clock).
//
// A model whose inference crashes its runtime would crash it again at its next request (the
// model is loaded again into the restarted runtime), failing every other model's requests in
// flight each time. Blaming it stops that: the loader pool then records a failure for it that
// lasts the failure expiry, where the other models the crash took are loaded again as soon as
// the runtime is back.
//
// Rules:
//  1. A model alone in flight at a crash is blamed at once.
//  2. Among several in flight, a model is blamed once it was in flight at `strikes` crashes
//     within `window` of each other (counting this one): the innocent models running beside a
//     crashing one rarely coincide with it twice, the guilty one is there every time.
//  3. A model's strikes older than `window` are forgotten; memory is bounded by the models in
//     flight at the crashes of the last window.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/timestamp.hpp"

namespace warm {

class crash_suspects {
 public:
  // strikes >= 1 (1 blames every model in flight); window > 0.
  explicit crash_suspects(std::uint32_t strikes = 2,
                          std::chrono::nanoseconds window = std::chrono::minutes(10));

  // Records a crash at `now` with `in_flight` running (duplicates count once) and returns the
  // models to blame for it, sorted.
  std::vector<std::string> crashed(const std::vector<std::string>& in_flight, timestamp now);

  // Models with a strike still within the window of `now` (for inspection and tests).
  std::size_t tracked() const { return strikes_.size(); }

 private:
  struct record {
    std::uint32_t count = 0;
    timestamp last{};
  };
  std::uint32_t needed_;
  std::chrono::nanoseconds window_;
  std::map<std::string, record> strikes_;
};

}  // namespace warm
