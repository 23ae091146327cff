// The runtime's remote sources: the S3 and HTTP stores, the remote repository roots, the disk
// tier and its actor, and the two blocking calls the registry and the loader workers make to get
// a pinned local copy of a remote model file.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/protocol/tier_protocol.hpp"
#include "runtime/executor.hpp"
#include "warm/runtime.hpp"

namespace warm {

struct runtime_sources {
  tier_actor tier;
  std::unique_ptr<executor> fetcher;  // the fetch tasks' threads
  // Resolves a registration's path remotely and waits for its pinned copy (registry offload).
  std::function<expected<tier_copy>(const std::string& path, std::optional<std::uint64_t> version)>
      locate;
  // The pinned copy of a resolved remote model, fetched again if evicted (loader workers).
  std::function<expected<tier_copy>(const model_location&)> materialize;
};

// Starts them: `remote_roots` are the repositories that are URLs, `device_bytes` the devices'
// capacity together (the tier's default budget is twice that). invalid_argument for a root that
// does not parse, credentials that are malformed, or a tier directory that cannot be used.
expected<runtime_sources> start_sources(caf::actor_system& system, const runtime_options& options,
                                        const std::vector<std::string>& remote_roots,
                                        std::uint64_t device_bytes, const clock& time,
                                        std::shared_ptr<runtime_metrics> metrics);

}  // namespace warm
