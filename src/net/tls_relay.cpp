#include "net/tls_relay.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "net/tls_server.hpp"

namespace warm::net {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t chunk_bytes = 64 << 10;  // one read, each direction
// Bytes moved each way per connection before the others get their turn.
constexpr std::size_t turn_bytes = 1 << 20;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// What a session call asks for before it can go on.
enum class need { nothing, read, write, failed };

need need_of(SSL* ssl, int result) {
  switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return need::read;
    case SSL_ERROR_WANT_WRITE:
      return need::write;
    default:
      return need::failed;
  }
}

// One client connection: its TCP socket and session, and once handshaken the relay's end of the
// socketpair and the bytes on their way.
struct link {
  int tcp = -1;
  int plain = -1;  // the relay's end of the socketpair; -1 until handshaken
  ssl_ptr ssl;
  std::string peer;
  clock::time_point deadline;  // of the handshake
  bool handshaken = false;
  std::string to_server;  // decrypted, not yet written to `plain`
  std::size_t to_server_at = 0;
  std::string
      to_client;  // read from `plain`, not yet taken by SSL_write (retried with the same bytes)
  bool client_done = false;  // the client's stream ended; `plain` is shut for writing once drained
  bool plain_shut = false;
  bool server_done = false;   // the server's stream ended; close_notify once to_client is sent
  bool failed = false;        // close now, without close_notify
  bool finished = false;      // both directions done: close after close_notify
  short tcp_events = POLLIN;  // what it waits for on each socket (0: not polled)
  short plain_events = 0;
  bool busy = false;  // has more to move without waiting
};

}  // namespace

struct tls_relay::impl {
  relay_options options;
  ready_fn ready;
  int wake_fd = -1;
  std::thread thread;
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;  // guards server, incoming, count, stopped
  std::shared_ptr<const ssl_server> server;
  std::vector<std::pair<int, std::string>> incoming;  // added, not yet taken by the thread
  std::size_t count = 0;                              // incoming + the thread's links
  bool stopped = false;

  // The thread's own.
  std::vector<link> links;
  std::map<std::string, std::size_t> handshaking;  // per peer
  clock::time_point last_log{};
  std::size_t unlogged_failures = 0;

  ~impl() { close_fd(wake_fd); }

  void wake() {
    std::uint64_t one = 1;
    while (::write(wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  void log(const std::string& line) {
    if (options.log) options.log(line);
  }

  // A failed handshake: logged at most once a second, with the failures since.
  void handshake_failed(const link& l, const std::string& why) {
    ++unlogged_failures;
    auto now = clock::now();
    if (now - last_log < std::chrono::seconds(1)) return;
    log("tls: handshake with " + l.peer + " failed (" + why + ")" +
        (unlogged_failures > 1 ? "; " + std::to_string(unlogged_failures) + " since the last report"
                               : ""));
    last_log = now;
    unlogged_failures = 0;
  }

  void take_incoming() {
    std::vector<std::pair<int, std::string>> taken;
    std::shared_ptr<const ssl_server> current;
    {
      std::lock_guard<std::mutex> lock(mutex);
      taken.swap(incoming);
      current = server;
    }
    for (auto& [fd, peer] : taken) {
      link l;
      l.tcp = fd;
      l.peer = std::move(peer);
      l.deadline = clock::now() + options.handshake_timeout;
      auto& pending = handshaking[l.peer];
      if (pending >= options.max_handshakes_per_peer) {
        log("tls: closing a connection from " + l.peer + ": " + std::to_string(pending) +
            " of its handshakes are in progress (the limit)");
        drop(l);
        continue;
      }
      l.ssl = current->open(fd);
      if (!l.ssl) {
        log("tls: closing a connection from " + l.peer + ": no memory for a session");
        drop(l);
        continue;
      }
      ++pending;
      links.push_back(std::move(l));
    }
  }

  // Closes a link's sockets (close_notify first when it finished cleanly) and uncounts it.
  void drop(link& l) {
    if (!l.handshaken) {
      auto at = handshaking.find(l.peer);
      if (l.ssl && at != handshaking.end() && --at->second == 0) handshaking.erase(at);
    } else if (l.finished && !l.failed) {
      SSL_shutdown(l.ssl.get());  // best effort: never waits
      ERR_clear_error();
    }
    l.ssl.reset();
    close_fd(l.plain);
    close_fd(l.tcp);
    std::lock_guard<std::mutex> lock(mutex);
    --count;
  }

  void handshake(link& l) {
    ERR_clear_error();
    int r = SSL_do_handshake(l.ssl.get());
    if (r == 1) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
        log("tls: closing a connection from " + l.peer + ": socketpair: " + std::strerror(errno));
        l.failed = true;
        return;
      }
      auto at = handshaking.find(l.peer);
      if (at != handshaking.end() && --at->second == 0) handshaking.erase(at);
      l.handshaken = true;
      l.plain = pair[0];
      l.plain_events = POLLIN;
      ready(l.tcp, pair[1]);
      relay(l);
      return;
    }
    switch (need_of(l.ssl.get(), r)) {
      case need::read:
        l.tcp_events = POLLIN;
        return;
      case need::write:
        l.tcp_events = POLLOUT;
        return;
      default:
        handshake_failed(l, tls_error_text());
        l.failed = true;
    }
  }

  // What one direction's turn ended on.
  enum class turn { waits, more, failed };

  // A session call that returned `result` <= 0: what it waits for on the TCP socket (added to
  // `tcp`), or failed.
  static turn waiting(link& l, int result, short& tcp) {
    switch (need_of(l.ssl.get(), result)) {
      case need::read:
        tcp |= POLLIN;
        return turn::waits;
      case need::write:
        tcp |= POLLOUT;
        return turn::waits;
      default:
        ERR_clear_error();
        return turn::failed;
    }
  }

  // Client to server: decrypted bytes written to `plain`. Adds what it waits for to `tcp` and
  // `plain` (POLLIN/POLLOUT); `more` when it stopped only because its turn ran out.
  turn to_server(link& l, short& tcp, short& plain) {
    char buffer[chunk_bytes];
    std::size_t moved = 0;
    for (;;) {
      if (l.to_server_at < l.to_server.size()) {
        if (moved >= turn_bytes) return turn::more;
        ssize_t n = ::send(l.plain, l.to_server.data() + l.to_server_at,
                           l.to_server.size() - l.to_server_at, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          plain |= POLLOUT;
          return turn::waits;
        }
        if (n < 0) return turn::failed;  // the server closed its end
        l.to_server_at += static_cast<std::size_t>(n);
        moved += static_cast<std::size_t>(n);
        continue;
      }
      l.to_server.clear();
      l.to_server_at = 0;
      if (l.client_done) {
        if (!l.plain_shut) ::shutdown(l.plain, SHUT_WR);
        l.plain_shut = true;
        return turn::waits;  // for nothing more this way
      }
      ERR_clear_error();
      int r = SSL_read(l.ssl.get(), buffer, sizeof buffer);
      if (r > 0) {
        l.to_server.assign(buffer, static_cast<std::size_t>(r));
        continue;
      }
      if (SSL_get_error(l.ssl.get(), r) == SSL_ERROR_ZERO_RETURN) {
        l.client_done = true;  // close_notify, or a FIN (SSL_OP_IGNORE_UNEXPECTED_EOF)
        continue;
      }
      return waiting(l, r, tcp);
    }
  }

  // Server to client: bytes read from `plain`, encrypted; as to_server.
  turn to_client(link& l, short& tcp, short& plain) {
    char buffer[chunk_bytes];
    std::size_t moved = 0;
    for (;;) {
      if (!l.to_client.empty()) {
        if (moved >= turn_bytes) return turn::more;
        ERR_clear_error();
        int r = SSL_write(l.ssl.get(), l.to_client.data(), static_cast<int>(l.to_client.size()));
        if (r > 0) {
          l.to_client.erase(0, static_cast<std::size_t>(r));
          moved += static_cast<std::size_t>(r);
          continue;
        }
        return waiting(l, r, tcp);  // a retry must offer these same bytes
      }
      if (l.server_done) return turn::waits;  // for nothing more this way
      ssize_t n = ::recv(l.plain, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        plain |= POLLIN;
        return turn::waits;
      }
      if (n <= 0) {
        l.server_done = true;  // closed or shut by the server (or failed: the same to the client)
        continue;
      }
      l.to_client.assign(buffer, static_cast<std::size_t>(n));
    }
  }

  // Moves what can move both ways, and sets what the link waits for next (or `busy`).
  void relay(link& l) {
    short tcp = 0, plain = 0;
    auto in = to_server(l, tcp, plain);
    auto out = to_client(l, tcp, plain);
    if (in == turn::failed || out == turn::failed) {
      l.failed = true;
      return;
    }
    if (l.server_done && l.to_client.empty()) {
      l.finished = true;  // what the client may still send has nowhere to go
      return;
    }
    l.tcp_events = tcp;
    l.plain_events = plain;
    // A turn that ran out, or bytes the session decrypted already (poll() does not see them, and
    // to_server stopped short of them only when it waits for the server): go round again at once.
    l.busy = in == turn::more || out == turn::more ||
             (!(plain & POLLOUT) && SSL_pending(l.ssl.get()) > 0);
  }

  void run() {
    std::vector<pollfd> fds;
    while (!stopping.load()) {
      take_incoming();
      fds.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      auto now = clock::now();
      auto until = clock::time_point::max();
      for (auto& l : links) {
        // A socket polled for nothing is left out (-1), or its hang-up would wake poll() for ever.
        fds.push_back({l.tcp_events ? l.tcp : -1, l.tcp_events, 0});
        fds.push_back({l.plain_events ? l.plain : -1, l.plain_events, 0});
        if (!l.handshaken) until = std::min(until, l.deadline);
        if (l.busy) until = now;
      }
      int timeout = -1;
      if (until != clock::time_point::max())
        timeout = static_cast<int>(std::max<long long>(
            0, std::chrono::ceil<std::chrono::milliseconds>(until - now).count()));
      int n = ::poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno != EINTR) break;  // cannot happen with valid arguments
      if (fds[0].revents & POLLIN) {
        std::uint64_t value;
        while (::read(wake_fd, &value, sizeof value) < 0 && errno == EINTR) {
        }
      }
      now = clock::now();
      for (std::size_t i = 0; i < links.size(); ++i) {
        auto& l = links[i];
        const short got = static_cast<short>(fds[1 + 2 * i].revents | fds[2 + 2 * i].revents);
        if (!l.handshaken) {
          if (got) handshake(l);
          if (!l.handshaken && !l.failed && now >= l.deadline) {
            handshake_failed(
                l, "not done within " + std::to_string(options.handshake_timeout.count()) + " ms");
            l.failed = true;
          }
        } else if (got || l.busy) {
          relay(l);
        }
      }
      for (auto it = links.begin(); it != links.end();) {
        if (it->failed || it->finished) {
          drop(*it);
          it = links.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& l : links) {
      l.failed = true;
      drop(l);
    }
    links.clear();
  }
};

expected<std::unique_ptr<tls_relay>> tls_relay::start(std::shared_ptr<const ssl_server> server,
                                                      ready_fn ready, relay_options options) {
  if (!server) return make_error(errc::invalid_argument, "tls relay: no server context");
  auto i = std::make_unique<impl>();
  i->options = std::move(options);
  i->ready = std::move(ready);
  i->server = std::move(server);
  i->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (i->wake_fd < 0)
    return make_error(errc::unavailable, std::string("eventfd: ") + std::strerror(errno));
  auto* raw = i.get();
  try {
    i->thread = std::thread([raw] { raw->run(); });
  } catch (const std::system_error& e) {
    return make_error(errc::unavailable, std::string("tls relay: ") + e.what());
  }
  return std::unique_ptr<tls_relay>(new tls_relay(std::move(i)));
}

tls_relay::tls_relay(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

tls_relay::~tls_relay() {
  stop();
}

void tls_relay::add(int tcp_fd, std::string peer) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (!impl_->stopped) {
      impl_->incoming.emplace_back(tcp_fd, std::move(peer));
      ++impl_->count;
      tcp_fd = -1;
    }
  }
  if (tcp_fd >= 0) {
    ::close(tcp_fd);
    return;
  }
  impl_->wake();
}

void tls_relay::set_server(std::shared_ptr<const ssl_server> server) {
  if (!server) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->server = std::move(server);
}

std::size_t tls_relay::connections() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->count;
}

void tls_relay::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->stopping.store(true);
  impl_->wake();
  if (impl_->thread.joinable()) impl_->thread.join();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [fd, peer] : impl_->incoming)
    ::close(fd);  // added after the thread's last look
  impl_->count -= impl_->incoming.size();
  impl_->incoming.clear();
}

}  // namespace warm::net
