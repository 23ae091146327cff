// What the disk tier (actors/tier_actor.hpp) is sent: requests for local copies of remote model
// files, its fetch tasks' results, and pins dropped. What it holds and does is published as
// metrics (warm_tier_*, warm_fetch*).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/common.hpp"
#include "sources/disk_tier.hpp"
#include "sources/remote_repository.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime_types.hpp"

namespace warm {

// A local copy of a remote model file: where it is, and a pin that keeps the tier from evicting
// it until the last copy of the pin is dropped (on any thread).
struct tier_copy {
  model_location where;
  std::shared_ptr<void> pin;
};

// When an acquire_copy may be answered.
enum class copy_mode {
  // Once the whole file is in the tier (at once when it is held).
  committed,
  // At once, also while the file is being fetched: the answer's `where.arriving` is then set, and
  // its reads wait for their bytes (a load that follows the fetch). For readers that read only
  // through read_file::read_exactly (the dense loader), never a descriptor of their own.
  arriving,
  // Only from what the tier holds now: not_found, and nothing fetched, when it does not.
  held_only,
};

// A blocking call (a loader worker's) that gets a local copy of the remote model a location
// names (model_location::source), in `mode` (committed or arriving).
using materialize_fn = std::function<expected<tier_copy>(const model_location&, copy_mode)>;

namespace msg {

// A local copy of `model`: answered at once from the tier when it holds the file with the same
// entity tag, else (unless `mode` is held_only) after one fetch shared by every request for the
// same object meanwhile: once it has written and committed the file, or, for `arriving`, as soon
// as it has started. A held answer is pinned; an arriving one is read through its own descriptor,
// which keeps the bytes whatever the tier does with the file later.
struct acquire_copy {
  sources::remote_model model;
  callback<tier_copy> done;
  copy_mode mode = copy_mode::committed;
};

// What a fetch task did with the object it was given: `now` is the object as the task last saw
// it (an object replaced during the fetch is fetched again if its size still fits the
// reservation, else reported changed for the tier to reserve again).
struct copy_fetched {
  std::string key;
  sources::tier_reservation reservation;
  expected<sources::fetch_stats> result;
  sources::remote_model now;
};

// A pin of `key` was dropped.
struct release_copy {
  std::string key;
};

// What the tier holds and has done (runtime: inspect, model statuses), answered at once from the
// actor's state without touching the disk: tier_info with `held` listing every complete file by
// its source URL and bytes, first to be evicted first (`models` left empty: the tier does not know
// model ids), the totals from the tier and from the runtime's metrics. A tier not yet opened
// answers `open` false and nothing else. With `source` set, `held` lists that source's file alone
// (or nothing): one model's status.
struct inspect_tier {
  std::function<void(tier_info)> done;
  std::string source;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::acquire_copy)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::copy_fetched)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::release_copy)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::inspect_tier)
