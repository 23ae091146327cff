// TOML as warmd reads it: the text checked and normalized first (config.cpp's ASCII pass: what
// toml++ would mis-handle is refused with its line), then parsed. Shared by the config file and
// the served-models file.
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "warm/error.hpp"

namespace warm::warmd {

// invalid_argument prefixed with `name` (and the line) for text that is not valid TOML. Never
// throws.
expected<toml::table> parse_toml(std::string_view text, const std::string& name);

}  // namespace warm::warmd
