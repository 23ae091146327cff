// The console's routes on the HTTP front (docs/console.md), internal to src/http: the page and
// its assets, the feed, the models' pages and the operator's actions.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string_view>

namespace warm {
class runtime;
}
namespace warm::console {
class monitor;
}

namespace warm::http::front_detail {

// An action's body is a small JSON object: at most this many bytes.
inline constexpr std::uint64_t max_action_body_bytes = 4096;

// The page and its two assets: served without the token (they hold no state; docs/console.md).
bool console_public(std::string_view path);

// Adds the console's routes to `server`. `rt` and `monitor` are borrowed and must outlive the
// server's serving; `timeout` bounds an action's wait (a load for waiting requests).
void add_console_routes(httplib::Server& server, runtime& rt, console::monitor& monitor,
                        std::chrono::milliseconds timeout);

}  // namespace warm::http::front_detail
