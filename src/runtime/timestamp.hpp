// Time as the runtime logic sees it: passed in by the caller (a real or a fake clock), never read
// from a clock inside the logic, so tests and the simulator are deterministic.
#pragma once

#include <chrono>

namespace warm {

using timestamp = std::chrono::steady_clock::time_point;

}  // namespace warm
