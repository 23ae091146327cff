// Listening sockets for warmd's HTTP and gRPC fronts (the Cap'n Proto service has kj's own), made
// by warm rather than by the fronts' libraries so that their backlog is the system's largest
// (SOMAXCONN: httplib's is 5, and bursts of new connections were reset) and their accept loops
// are warm's own.
//
// Unix sockets are created mode 0600 whatever the umask, so that only warmd's user (and root) may
// connect — the file's mode is the access rule, and no token is asked there — and never over
// anything but a socket nobody serves.
#pragma once

#include <cstdint>
#include <string>

namespace warm::net {

// Prepares `path` for a new listener: nothing there, or a socket no server answers on (removed).
// Empty when ready, else why not: "PATH exists and is not a socket", "PATH is in use by another
// server", or the system's error.
std::string clear_stale_socket(const std::string& path);

// A listening unix socket at `path` (non-blocking, close-on-exec, backlog SOMAXCONN, file mode
// 0600), after clear_stale_socket; -1 with `why` set when it cannot be made. Changes the process's
// umask for the moment of bind: call it while no other thread creates files (at start).
int listen_unix(const std::string& path, std::string& why);

// A listening TCP socket on host:port (port 0: any free one; `bound_port` gets the one bound),
// non-blocking, close-on-exec, SO_REUSEADDR, backlog SOMAXCONN; the first of the host's addresses
// that can be bound. -1 with `why` set ("cannot listen on HOST:PORT: …") when none can.
int listen_tcp(const std::string& host, std::uint16_t port, std::uint16_t& bound_port,
               std::string& why);

}  // namespace warm::net
