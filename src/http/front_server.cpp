#include "http/front_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace warm::http::front_detail {

void socket_acceptor::run() {
  int pause_ms = 0;  // the next pause after a failed accept; 0 while accepts succeed
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(fds, 2, pause_ms > 0 ? pause_ms : -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (pause_ms > 0 && log_) log_("http: accepting connections again");
      pause_ms = 0;
      if (tcp_) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      take_(fd);
    } else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
      if (pause_ms == 0 && log_)
        log_(std::string("http: accept failed (") + std::strerror(errno) + "); retrying");
      pause_ms = pause_ms == 0 ? 10 : std::min(2 * pause_ms, 1000);
    }
  }
}

}  // namespace warm::http::front_detail
