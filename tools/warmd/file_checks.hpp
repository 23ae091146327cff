// warmd's checks of the files it trusts before it starts: the token file and the state
// directory. What an attacker on the same machine could read or swap is refused or warned about
// (docs/configuration.md, "Files warmd trusts").
#pragma once

#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::warmd {

// The token file: a warning (returned, for the caller to log) when group or others may read it
// or when it is a symlink; the token is still used. Nothing when the file does not exist (reading
// it reports that).
std::vector<std::string> check_token_file(const std::string& path);

// The state directory (it may not exist yet: then nothing is checked). invalid_argument when
// others may write to it (anyone could replace registry.db) unless its sticky bit is set; a
// warning when it is a symlink (where it points is trusted as it is).
expected<std::vector<std::string>> check_state_dir(const std::string& path);

}  // namespace warm::warmd
