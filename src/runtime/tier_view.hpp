// Where a remote model's bytes are: the disk tier's files (tier_info::held, by source URL) joined
// with the registered models they are copies of. Pure logic over warm's plain types: the runtime
// calls it on the answers of the tier actor and the registry; tests call it directly.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "warm/runtime_types.hpp"

namespace warm {

// Fills each held file's `models` with the ids whose source URL (`sources`: pairs of model id and
// source, in any order, an id at most once) is the file's, sorted; a file no model names keeps an
// empty list. Replaces whatever `models` held before.
void attach_models(tier_info& tier,
                   const std::vector<std::pair<std::string, std::string>>& sources);

// Sets in_tier and tier_bytes of each status with a source (model_status::source) from the file
// `tier` holds for that source: true and its bytes when held, false and 0 when not. A status
// without a source (a model on local disk) is left as it is.
void mark_tier(std::vector<model_status>& statuses, const tier_info& tier);
void mark_tier(model_status& status, const tier_info& tier);

}  // namespace warm
