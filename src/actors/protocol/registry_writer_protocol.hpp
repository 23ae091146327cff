// What the registry's store writer (actors/registry_writer.hpp) is sent, by the registry only:
// its group commits, and what its memory has taken in.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "actors/protocol/common.hpp"
#include "storage/registry_storage.hpp"

namespace warm {
namespace msg {

// Commit one group of staged changes in one transaction (request; answered `store_committed`).
struct store_commit {
  std::vector<registry_change> changes;
};
// The commit's outcome; after a failure, what the disk holds now (re-read), when it can be read,
// so the registry can make its memory match.
struct store_committed {
  expected<void> result;
  std::optional<registry_contents> disk;
};
// Commit what is left (possibly nothing), then stop: the registry's last words.
struct store_close {
  std::vector<registry_change> changes;
};
// The registry's memory now reflects `update` (registry_storage::seen): sent after every commit
// of changes staged before the registry took it in, and before any staged after.
struct store_seen {
  std::shared_ptr<const registry_update> update;
};

}  // namespace msg
}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_commit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_committed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_close)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::store_seen)
