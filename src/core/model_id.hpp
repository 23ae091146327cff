// The rule every model and vmodel id follows (the registry's and the served models' own).
#pragma once

#include <string>

#include "warm/error.hpp"

namespace warm {

// An id names a model or vmodel: 1..256 bytes of printable ASCII without spaces or '/'.
// invalid_argument naming `what` ("model", "vmodel") and the id otherwise.
expected<void> check_id(const std::string& id, const char* what);

}  // namespace warm
