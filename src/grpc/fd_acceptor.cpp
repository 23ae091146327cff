#include "grpc/fd_acceptor.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "net/listen.hpp"
#include "net/tls_relay.hpp"

namespace warm::grpc_front {
namespace {

constexpr std::chrono::milliseconds first_pause{10};
constexpr std::chrono::milliseconds longest_pause{1000};

std::string peer_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_UNIX) return "unix";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, host, sizeof host);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, host, sizeof host);
  return host;
}

// Accept errors that say nothing about the listener: the connection went away before it was
// taken, or a signal came (accept(2) asks to treat the protocol's errors like EAGAIN).
bool transient(int e) {
  switch (e) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EPERM:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct fd_acceptor::impl {
  acceptor_options options;
  int listen_fd = -1;
  int wake_fd = -1;  // an eventfd: written once by stop()
  std::uint16_t port = 0;
  std::thread thread;
  std::function<void(int)> take;
  std::unique_ptr<net::tls_relay> relay;  // with TLS

  std::mutex mutex;  // guards live (the accepting thread, the relay's and open_connections())
  struct accepted {
    int fd;  // the accepted socket: counted while open
    ino_t inode;
    std::string peer;
    int handed = -1;  // what `take` received (fd, or the relay's plaintext end); -1: not yet
    ino_t handed_inode = 0;
  };
  std::vector<accepted> live;

  ~impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
    if (!options.unix_path.empty() && port == 0 && bound_unix) ::unlink(options.unix_path.c_str());
  }
  bool bound_unix = false;  // the socket file at options.unix_path is this acceptor's

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  // Drops the sockets whose descriptors no longer name what was accepted (closed by their owner,
  // the number perhaps taken by another file since). Needs `mutex`.
  void sweep() {
    live.erase(
        std::remove_if(live.begin(), live.end(), [](const accepted& a) { return !same_socket(a); }),
        live.end());
  }

  static bool same_socket(int fd, ino_t inode) {
    struct stat st {};
    return fd >= 0 && ::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == inode;
  }
  static bool same_socket(const accepted& a) { return same_socket(a.fd, a.inode); }

  // The relay handed over connection `tcp` as `plain`.
  void handed(int tcp, int plain) {
    struct stat st {};
    if (::fstat(plain, &st) != 0) {
      ::close(plain);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& a : live)
        if (a.fd == tcp && same_socket(a)) {
          a.handed = plain;
          a.handed_inode = st.st_ino;
        }
    }
    take(plain);
  }

  void admit(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return;
    }
    std::string peer = peer_of(fd);
    {
      std::lock_guard<std::mutex> lock(mutex);
      // A number the kernel gave out again was closed by its owner in between.
      live.erase(
          std::remove_if(live.begin(), live.end(), [fd](const accepted& a) { return a.fd == fd; }),
          live.end());
      if (live.size() >= options.max_connections) sweep();
      if (live.size() >= options.max_connections) {
        log("grpc: closing a connection from " + peer + ": " + std::to_string(live.size()) +
            " connections are open (the limit)");
        ::close(fd);
        return;
      }
      // A plain socket is handed over as it is; one with TLS once the relay has done its handshake.
      live.push_back({fd, st.st_ino, peer, relay ? -1 : fd, relay ? 0 : st.st_ino});
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (relay)
      relay->add(fd, std::move(peer));
    else
      take(fd);
  }

  // Waits for the listening socket (or only for `pause`, after a failed accept); false once
  // stop() has been called.
  bool wait(std::chrono::milliseconds pause) {
    pollfd fds[2] = {{wake_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    const bool paused = pause.count() > 0;
    int n = ::poll(fds, paused ? 1 : 2, paused ? static_cast<int>(pause.count()) : -1);
    return !(n > 0 && (fds[0].revents & POLLIN));
  }

  void run() {
    std::chrono::milliseconds pause{0};
    while (wait(pause)) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK || transient(e)) continue;  // keeps a pause in force
        // EMFILE, ENFILE, ENOBUFS, ENOMEM, or anything else: never a reason to stop listening.
        pause = pause.count() == 0 ? first_pause : std::min(2 * pause, longest_pause);
        log("grpc: accept failed (" + std::string(std::strerror(e)) + "); trying again in " +
            std::to_string(pause.count()) + " ms");
        continue;
      }
      if (pause.count() > 0) log("grpc: accepting connections again");
      pause = std::chrono::milliseconds(0);
      admit(fd);
    }
  }
};

expected<std::unique_ptr<fd_acceptor>> fd_acceptor::listen(acceptor_options options) {
  auto i = std::make_unique<impl>();
  i->options = std::move(options);
  if (!i->options.unix_path.empty()) {
    std::string why;
    i->listen_fd = net::listen_unix(i->options.unix_path, why);
    if (i->listen_fd < 0)
      return make_error(why.find("not a socket") != std::string::npos ? errc::invalid_argument
                                                                      : errc::unavailable,
                        why);
    i->bound_unix = true;
    i->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (i->wake_fd < 0)
      return make_error(errc::unavailable, std::string("eventfd: ") + std::strerror(errno));
    return std::unique_ptr<fd_acceptor>(new fd_acceptor(std::move(i)));
  }
  std::string why;
  i->listen_fd = net::listen_tcp(i->options.host, i->options.port, i->port, why);
  if (i->listen_fd < 0) return make_error(errc::unavailable, why);
  i->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (i->wake_fd < 0)
    return make_error(errc::unavailable, std::string("eventfd: ") + std::strerror(errno));
  if (i->options.tls) {
    net::relay_options relay;
    relay.handshake_timeout = i->options.handshake_timeout;
    relay.log = i->options.log;
    auto* raw = i.get();
    auto started = net::tls_relay::start(
        i->options.tls, [raw](int tcp, int plain) { raw->handed(tcp, plain); }, std::move(relay));
    if (!started) return make_error(errc::unavailable, "gRPC: " + started.error().message);
    i->relay = std::move(*started);
  }
  return std::unique_ptr<fd_acceptor>(new fd_acceptor(std::move(i)));
}

fd_acceptor::fd_acceptor(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

fd_acceptor::~fd_acceptor() {
  stop();
}

void fd_acceptor::serve(std::function<void(int fd)> take) {
  impl_->take = std::move(take);
  auto* raw = impl_.get();
  impl_->thread = std::thread([raw] { raw->run(); });
}

void fd_acceptor::stop() {
  if (!impl_->thread.joinable()) return;
  std::uint64_t one = 1;
  while (::write(impl_->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
  impl_->thread.join();
  if (impl_->relay) impl_->relay->stop();
  ::close(impl_->listen_fd);
  impl_->listen_fd = -1;
}

void fd_acceptor::set_tls(std::shared_ptr<const net::ssl_server> tls) {
  if (impl_->relay) impl_->relay->set_server(std::move(tls));
}

std::uint16_t fd_acceptor::port() const {
  return impl_->port;
}

std::string fd_acceptor::peer(int fd) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (const auto& a : impl_->live)  // a number given out again may be in an older entry too
    if (a.handed == fd && impl::same_socket(a.handed, a.handed_inode)) return a.peer;
  return {};
}

std::size_t fd_acceptor::open_connections() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->sweep();
  return impl_->live.size();
}

}  // namespace warm::grpc_front
