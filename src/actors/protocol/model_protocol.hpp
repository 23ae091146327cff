// What a model actor (actors/model_actor.hpp) is sent: uses and requests from the registry, and
// its load's progress from the loader pool and the device that installs it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/protocol/common.hpp"
#include "core/lease.hpp"
#include "core/once_callback.hpp"
#include "core/serving_slot.hpp"
#include "storage/file.hpp"
#include "warm/clock.hpp"
#include "warm/metrics.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
namespace msg {

// The answer to model_use: `acquired` shared, since a lease cannot be copied and CAF messages
// must be copyable. Empty for a proactive use (nothing was waited for).
struct granted {
  std::shared_ptr<acquired> value;
};
// From the registry, for its own use (a vmodel's target), request; answered with `granted` or an
// error: the same answer as client_use's, a waiting one through a response promise.
struct model_use {
  use_kind kind = use_kind::wait;
  timestamp arrival{};
};
// From the registry: a client's use (or a sync registration's), answered to the client's
// callback `done` directly (the registry does not wait for it, and the lease takes no hop back
// through it): a lease at once on a hit, once the load is over when it waits, empty when
// proactive, or an error (failing fast). Dropped uncalled, the callback answers `unavailable`.
struct client_use {
  use_kind kind = use_kind::wait;
  timestamp arrival{};
  once_callback<acquired> done;
};
// From the registry, request; answered with the model's status (model_status).
struct model_status_request {};
// From the registry: the registration ended. Cancels the queued load, unloads, fails waiters with
// not_found; the actor stops once no load of it is in flight.
struct model_unregister {};
// From the registry, an operator's unload (request; answered with void, or an error while the
// model loads for waiters): the loaded copy is withdrawn or a queued background load cancelled;
// the model stays registered.
struct unload_loaded {};
// From the device that holds `slot`: it evicted it (for room, for a newer registration's copy,
// or with the runtime process that held it; the device's metrics count which). The model stops
// serving from it; its bytes are freed once quiescent. Ignored unless `slot` is the model's
// current one.
struct slot_evicted {
  std::shared_ptr<serving_slot> slot;
  eviction_reason reason = eviction_reason::capacity;  // told to watchers (model_event::reason)
};
// From the registry, an operator's retry (request; answered with void): leave LOADING_FAILED for
// NOT_LOADED, forget the error and the fail-fast deadline, and have the pool forget its records
// (msg::forget_failures). The next use loads.
struct forget_failure {};
// From the offload, while LOADING_FAILED: a use that would fail fast is held while the model's
// file is looked at. If the file differs from what the failed load saw (size, mtime, inode;
// appeared or vanished), the failure is stale and forgotten as a retry's, and the held uses wait
// for a new load; otherwise they fail fast, in their order.
struct file_checked {
  file_seen file;
};
// From the loader pool: a worker took the load (QUEUED → LOADING).
struct load_started {
  std::string device;
  std::shared_ptr<std::atomic<std::uint64_t>> progress;  // bytes copied so far (live)
};
// From the device that installed the model: the slot to serve from (LOADED; the route is
// published and the waiters answered). The device sends it, not the loader pool, because from
// then on the device alone speaks for the slot: its slot_evicted (evicted for room, replaced, lost
// with a model runtime) may follow at once, and CAF keeps messages in order only between one
// sender and one receiver. Routed through the pool, load_done could arrive after the eviction
// of the slot it announces.
struct load_done {
  std::string device;
  std::shared_ptr<serving_slot> slot;
  double seconds = 0;
};
// The pool gave up on the load: `error` is final (after retries); new uses fail fast with it
// until `retry_at`.
struct load_failed {
  warm::error error;
  timestamp retry_at{};
  // The model's file as the failed load saw it before reading; absent when no load ran (refused
  // by every device). The model actor compares it with the file now to tell a stale record.
  std::optional<file_seen> file;
  // What the model measured when it loaded but its charge could not be settled (0 otherwise):
  // the model's next load reserves this.
  std::uint64_t measured = 0;
};
// From the loader pool: it dropped a cancelled load; nothing of it remains.
struct load_cancelled {};

}  // namespace msg
}  // namespace warm

// The answer to model_status_request.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::model_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::granted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_use)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::client_use)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_status_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::model_unregister)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::unload_loaded)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::slot_evicted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::forget_failure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::file_checked)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_started)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_failed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::load_cancelled)
