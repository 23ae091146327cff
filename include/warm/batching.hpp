// Dynamic batching's settings (runtime_options::batching): requests for one model that arrive
// together share one pass over its weights. What runs together, and when: src/core/batch_plan.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace warm {

struct batching_options {
  std::uint64_t max_batch = 0;                   // rows in one pass; 0 or 1: batching off
  std::chrono::microseconds max_queue_delay{0};  // how long the oldest request may wait for more
  std::vector<std::uint64_t> preferred_batch;    // sizes run as soon as formed; each 1..max_batch
  std::uint64_t max_queue = 1024;                // requests queued per model; past it: unavailable

  bool enabled() const { return max_batch > 1; }
  bool operator==(const batching_options& o) const {
    return max_batch == o.max_batch && max_queue_delay == o.max_queue_delay &&
           preferred_batch == o.preferred_batch && max_queue == o.max_queue;
  }
  bool operator!=(const batching_options& o) const { return !(*this == o); }
};

}  // namespace warm
