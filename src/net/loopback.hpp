// Whether a host name or address is loopback-only: what warmd's listeners (Cap'n Proto and HTTP)
// bind without --allow-remote.
#pragma once

#include <string>

namespace warm::net {

// True for 127.0.0.0/8, ::1 and "localhost".
inline bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace warm::net
