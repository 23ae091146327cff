// warmd's checks of the files it trusts before it starts: the token file, the state directory
// and the repositories. What an attacker on the same machine could read or swap is refused or
// warned about (docs/configuration.md, "Files warmd trusts").
#pragma once

#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::warmd {

// The token file: invalid_argument when group or others may read or write it (it is the whole
// of a client's credential); a warning (returned, for the caller to log) when it is a symlink.
// Nothing when the file does not exist (reading it reports that).
expected<std::vector<std::string>> check_token_file(const std::string& path);

// The state directory (it may not exist yet: then nothing is checked). invalid_argument when its
// group or others may write to it, sticky bit or not (they could replace or plant files beside
// registry.db); a warning when it is a symlink (where it points is trusted as it is).
expected<std::vector<std::string>> check_state_dir(const std::string& path);

// A repository root: invalid_argument when every user may write to it (anyone could publish a
// model, and a TorchScript model is code); a warning when its group may.
expected<std::vector<std::string>> check_repository(const std::string& path);

}  // namespace warm::warmd
