// Comparing a presented secret (an access token) with the expected one without telling the
// presenter, through the time taken, where they first differ or how long the expected one is.
// Used by warmd's two authenticated fronts: the Cap'n Proto authenticator
// (src/rpc/authenticator.cpp) and the HTTP front's bearer token (src/http/http_front.cpp).
#pragma once

#include <string_view>

namespace warm::net {

// True when `presented` and `expected` hold the same bytes (two empty strings are equal).
//
// Contract:
//  1. The running time depends on presented.size() only: every presented byte is compared,
//     whatever the contents, and there is no early return on a length mismatch. The length
//     difference is folded into the result instead, so a prefix, a longer or a shorter string
//     never compares equal.
//  2. `expected` is the secret: neither its contents nor its length choose a branch or bound a
//     loop. (Bytes of `presented` past the end of `expected` are compared with expected's first
//     byte; they cannot change the answer, since the lengths already differ.)
//  3. Whether `expected` is empty is not treated as a secret: an empty token is a configuration
//     (callers refuse it or turn authentication off before calling).
// Pure and thread-safe; no allocation.
bool constant_time_equal(std::string_view presented, std::string_view expected) noexcept;

}  // namespace warm::net
