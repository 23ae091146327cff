// Opening a registered model's file where its location says, confined to its repository root.
#pragma once

#include "storage/file.hpp"
#include "warm/error.hpp"
#include "warm/model_repository.hpp"

namespace warm {

// Opens `where.path` for reading. With a root: opens the root directory by its path (its last
// component may not be a symlink) and the file beneath it with open_beneath, so the path cannot
// lead out of the root whatever changed on disk since it was resolved; not_found when the root
// is gone. Without one: opens the path as it stands (read_file::open).
expected<read_file> open_located(const model_location& where);

// Looks at the file `where` names (opened as open_located does, then fstat): its identity, or
// absent when it cannot be opened or stat'ed. Blocking I/O: never on an actor's thread.
file_seen look_at(const model_location& where);

}  // namespace warm
