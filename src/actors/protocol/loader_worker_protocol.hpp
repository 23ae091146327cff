// What a loader worker (actors/loader_worker.hpp) is sent, by the loader pool: one load to run on
// the worker's own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "actors/protocol/common.hpp"
#include "core/weights.hpp"
#include "storage/file.hpp"
#include "warm/device.hpp"
#include "warm/model_repository.hpp"

namespace warm {
namespace msg {

// From the loader pool, request; answered with load_result: copy `where` into `dev` against
// `reservation` on the worker's own thread.
struct load_job {
  std::shared_ptr<device> dev;
  model_location where;
  std::shared_ptr<memory_reservation> reservation;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // the worker's live byte count
};
// The answer to load_job.
struct load_result {
  // Set on success. Its charge is settled when it measured no more than was reserved; otherwise
  // its shortfall() is still to be reserved (by the device actor, which may evict for it).
  std::shared_ptr<warm::weights> model;
  warm::error error;
  double seconds = 0;
  file_seen file;  // on failure: the model's file as the worker saw it before the load
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_result)
