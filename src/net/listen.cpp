#include "net/listen.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warm::net {

namespace {

bool to_address(const std::string& path, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return true;
}

}  // namespace

std::string clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // nothing there
  if (!S_ISSOCK(st.st_mode)) return path + " exists and is not a socket";
  sockaddr_un addr;
  if (!to_address(path, addr)) return "unix socket path " + path + " is too long";
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::close(fd);
  if (rc == 0) return path + " is in use by another server";
  if (err != ECONNREFUSED && err != ENOENT) return path + ": " + std::strerror(err);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return "cannot remove " + path + ": " + std::strerror(errno);
  return {};
}

int listen_unix(const std::string& path, std::string& why) {
  sockaddr_un addr;
  if (!to_address(path, addr)) {
    why = "unix socket path \"" + path + "\" is empty or too long";
    return -1;
  }
  if (why = clear_stale_socket(path); !why.empty()) return -1;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  mode_t old = ::umask(0177);  // the socket file is born 0600
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::umask(old);
  if (rc != 0 || ::listen(fd, SOMAXCONN) != 0) {
    why = "cannot listen on unix:" + path + ": " + std::strerror(rc != 0 ? err : errno);
    ::close(fd);
    return -1;
  }
  ::chmod(path.c_str(), 0600);
  return fd;
}

int listen_tcp(const std::string& host, std::uint16_t port, std::uint16_t& bound_port,
               std::string& why) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = "cannot resolve " + where + ": " + ::gai_strerror(rc);
    return -1;
  }
  int listening = -1;
  std::string last = "no address";
  for (auto* a = found; a && listening < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listening = fd;
  }
  ::freeaddrinfo(found);
  if (listening < 0) {
    why = "cannot listen on " + where + ": " + last;
    return -1;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listening, reinterpret_cast<sockaddr*>(&bound), &length);
  bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return listening;
}

}  // namespace warm::net
