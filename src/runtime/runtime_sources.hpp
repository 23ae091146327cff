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
  // Resolves a registration's path remotely and gives a copy to describe it from (registry
  // offload): the tier's when it holds the file; else, for safetensors, its header alone (an
  // arriving location whose weights never come), so that registering a model costs a HEAD and a
  // small GET whatever its size; else (TorchScript, described from its whole archive, and files
  // of at most sources::header_first_look bytes) the tier's copy once fetched.
  std::function<expected<tier_copy>(const std::string& path, std::optional<std::uint64_t> version)>
      locate;
  // The copy of a resolved remote model, fetched again if evicted (loader workers).
  materialize_fn materialize;
  // The remote roots and their stores (the version manager lists model directories in them).
  std::shared_ptr<const sources::remote_repository> remote;
};

// Starts them: `remote_roots` are the repositories that are URLs, `device_bytes` the devices'
// capacity together (the tier's default budget is twice that). invalid_argument for a root that
// does not parse, credentials that are malformed, or a tier directory that cannot be used.
expected<runtime_sources> start_sources(caf::actor_system& system, const runtime_options& options,
                                        const std::vector<std::string>& remote_roots,
                                        std::uint64_t device_bytes, const clock& time,
                                        std::shared_ptr<runtime_metrics> metrics);

}  // namespace warm
