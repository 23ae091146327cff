#include "net/front_access.hpp"

#include "net/loopback.hpp"

namespace warm::net {

std::string access_problem(const front_access& access, const std::string& front) {
  if (!access.unix_path.empty()) return {};
  if (!access.allow_remote && !is_loopback_host(access.host))
    return front + " address " + access.host +
           " is not loopback; remote access needs --allow-remote";
  if (access.allow_remote && access.token.empty())
    return "remote " + front + " access needs a token";
  return {};
}

}  // namespace warm::net
