// The pieces of the HTTP front's connection gate (conn_gate.cpp) that its connections and the
// workers' streams share: a connection's state, its reads and writes (plain, or through its TLS
// session), the stream a worker serves one request from, and the per-request flags a handler sets
// on its worker thread. Internal to src/http.
//
// TLS: a connection's session does its handshake on the gate's poll thread (continue_handshake),
// then carries every byte both ways: the gate's reads of heads and bodies, its own answers, the
// worker's stream and the 20 ms linger. A session may hold decrypted bytes that poll() cannot see
// (tls_pending()): whoever is about to wait in poll() for a connection looks there first. A
// connection belongs to one thread at a time (the acceptor's, the poll thread's, then one
// worker's), and so does its session.
#pragma once

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "http/conn_gate.hpp"
#include "net/tls_server.hpp"

namespace warm::http::gate {

using clock = std::chrono::steady_clock;

// The current request's, on the worker serving it (conn_gate.hpp's current_request_* and
// close_after_answer); cleared by the worker before and after each request.
extern thread_local bool request_timed_out;
extern thread_local bool request_over_limit;
extern thread_local bool close_requested;

// Shuts the socket down and closes it.
void close_socket(int fd);
// Best effort: a short JSON answer to a plain connection about to be closed, never blocking;
// closes it.
void answer_and_close(int fd, int status, const char* reason, const char* message);

// A connection's socket and the bytes received from it that no request has consumed yet.
struct connection {
  int fd = -1;
  net::ssl_ptr ssl;         // TLS: its session (freed with the connection); null: plain
  bool handshaken = false;  // TLS: the handshake is complete
  bool broken = false;      // TLS: a session call failed, or a write of the gate's was cut short:
                            // no more reads or writes, no close_notify; the gate closes it
  short events = POLLIN;    // what the gate polls its socket for (a handshake may wait to write)
  std::string pending;
  std::string peer;         // the address it counts against (address_of)
  clock::time_point since;  // when it began waiting for a head
  head_progress scanned;    // of pending, while it waits
  bool judged = false;      // pending (bytes left from the last request) looked at since
  bool fresh = true;        // none of its requests served yet: its head has the first deadline
  // While the gate reads its body (need > 0) or it waits for room to (in the room queue):
  std::size_t need = 0;  // pending and blocks hold head and body once they have this many bytes
  // The body the gate read past `pending`, in blocks the worker's stream frees as it reads them
  // (so that a large body is not held twice while a handler copies it).
  std::deque<std::string> blocks;
  std::size_t block_bytes = 0;   // in blocks
  std::size_t head_size = 0;     // of the head at the start of pending
  std::uint64_t length = 0;      // of the body
  std::uint64_t reserved = 0;    // body bytes counted against max_buffered_body_bytes
  clock::time_point head_at;     // its head was complete: the body deadline counts from here
  clock::time_point reading_at;  // the gate began reading the body: the rate rule counts from here
  bool expect_continue = false;  // the client waits for 100 Continue before it sends the body
  // Its socket's addresses as httplib asks for them on every request, looked up on the first
  // (a socket's addresses do not change); port -1: not looked up yet.
  std::string remote_ip, local_ip;
  int remote_port = -1, local_port = -1;
};

// One read or write that never waits.
struct io_result {
  ssize_t n = 0;   // > 0: bytes read or written; 0: the peer closed (a read); < 0: none, see wait
  short wait = 0;  // with n < 0: poll for these events and try again; 0: the connection failed
};
// Reads up to `size` bytes (decrypted, with TLS) into `buffer`. A TLS session's records may need
// a write (then wait is POLLOUT).
io_result receive_some(connection& c, char* buffer, std::size_t size);
// Writes some of `size` bytes (at least one, or none with wait or failure); TLS: a write that
// returned wait must be tried again with the same bytes, or the connection closed.
io_result send_some(connection& c, const char* data, std::size_t size);
// TLS: decrypted bytes held by the session, which poll() on the socket does not report. Read them
// (receive_some) before waiting for the socket. False for a plain connection.
bool tls_pending(const connection& c);

enum class handshake { done, waiting, failed };
// TLS: advances the handshake as far as it goes without waiting. waiting: poll for c.events;
// failed: `why` gets OpenSSL's reason (a client without TLS, or without an accepted certificate),
// and the connection is to be closed. done (sets c.handshaken) also for a plain connection.
handshake continue_handshake(connection& c, std::string& why);

// Closes a connection's socket; TLS after its handshake: sends close_notify first, best effort
// (never waiting, nor for the peer's), then frees the session. Idempotent.
void close_connection(connection& c);
// answer_and_close for a connection: through its session once its handshake is complete; before
// it, the socket is closed without an answer (the client expects a handshake, not HTTP).
void answer_and_close(connection& c, int status, const char* reason, const char* message);

// When a body of which `body` bytes have arrived since `start` falls below `rate` bytes a second
// on average, counted from `after` past `start` (time_point::max() for rate 0).
clock::time_point slow_body_at(clock::time_point start, std::uint64_t body, std::uint64_t rate,
                               std::chrono::milliseconds after);

// What a worker serves one request from: the pending bytes, the blocks of a body the gate read,
// then the socket, every read from the socket bounded by the request's deadline and rate rule.
class gate_stream final : public httplib::Stream {
 public:
  // `budget`: the bytes this request may read past its head (the head's own bound on top); 0: any.
  // `head_size`: the bytes of its head, which the rate rule (`rate` bytes a second after
  // `rate_after`) does not count.
  gate_stream(connection& c, clock::time_point deadline, std::uint64_t budget,
              std::size_t head_bytes, std::size_t head_size, std::uint64_t rate,
              std::chrono::milliseconds rate_after)
      : c_(c),
        deadline_(deadline),
        budget_(budget ? budget + head_bytes : 0),
        head_size_(head_size),
        rate_(rate),
        rate_after_(rate_after) {}

  bool is_readable() const override {
    return pos_ < c_.pending.size() || !c_.blocks.empty() || tls_pending(c_) ||
           wait(POLLIN, read_deadline());
  }
  bool is_writable() const override { return wait(POLLOUT, clock::now() + write_timeout); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (pos_ >= c_.pending.size() &&
        !c_.blocks.empty()) {  // the next block of a body the gate read
      c_.pending = std::move(c_.blocks.front());
      c_.blocks.pop_front();
      c_.block_bytes -= c_.pending.size();
      pos_ = 0;
    }
    if (pos_ >= c_.pending.size()) {
      c_.pending.clear();
      pos_ = 0;
      auto until = read_deadline();
      char buffer[16 << 10];
      io_result got{-1, 0};
      for (;;) {  // a read before any wait: a TLS session may hold bytes already
        if (clock::now() >= until || (got = receive_some(c_, buffer, sizeof buffer)).wait == 0)
          break;
        if (!wait(got.wait, until)) break;
      }
      if (got.n <= 0) {
        if (got.n < 0 && clock::now() >= until) request_timed_out = true;
        return got.n;
      }
      c_.pending.assign(buffer, static_cast<std::size_t>(got.n));
    }
    std::size_t n = std::min(size, c_.pending.size() - pos_);
    if (budget_) {
      if (taken_ >= budget_) {
        request_over_limit = true;
        return -1;
      }
      n = static_cast<std::size_t>(std::min<std::uint64_t>(n, budget_ - taken_));
      taken_ += n;
    }
    std::memcpy(ptr, c_.pending.data() + pos_, n);
    pos_ += n;
    delivered_ += n;
    return static_cast<ssize_t>(n);
  }

  // Some of the bytes, as soon as the socket takes them; -1 when it takes none within
  // write_timeout.
  ssize_t write(const char* ptr, std::size_t size) override {
    if (size == 0) return 0;
    auto until = clock::now() + write_timeout;
    for (;;) {
      auto sent = send_some(c_, ptr, size);
      if (sent.n >= 0 || sent.wait == 0) return sent.n;
      if (!wait(sent.wait, until)) {
        if (c_.ssl)
          c_.broken = true;  // the session waits for these very bytes: nothing else may follow
        return -1;
      }
    }
  }

  // The connection's addresses, looked up once per connection (two system calls and two
  // inet_ntop a request otherwise).
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (c_.remote_port < 0) address(::getpeername, c_.remote_ip, c_.remote_port);
    ip = c_.remote_ip;
    port = c_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (c_.local_port < 0) address(::getsockname, c_.local_ip, c_.local_port);
    ip = c_.local_ip;
    port = c_.local_port;
  }
  socket_t socket() const override { return c_.fd; }

  // The bytes received but not consumed (a pipelined next request) go back to the connection,
  // without the room a body read by the gate took (no longer counted against the bound).
  void keep_unread() {
    c_.pending.erase(0, pos_);
    for (auto& block : c_.blocks)
      c_.pending += block;  // a body the server did not read
    c_.blocks.clear();
    c_.block_bytes = 0;
    if (c_.pending.capacity() > (64 << 10)) std::string(c_.pending).swap(c_.pending);
  }

 private:
  static constexpr std::chrono::seconds write_timeout{5};

  // The body deadline, or sooner the time the body falls below the minimum rate.
  clock::time_point read_deadline() const {
    auto body = delivered_ > head_size_ ? delivered_ - head_size_ : 0;
    return std::min(deadline_, slow_body_at(start_, body, rate_, rate_after_));
  }

  bool wait(short events, clock::time_point until) const {
    for (;;) {
      // Rounded up: false only once `until` has passed, so a caller can tell a deadline by the
      // clock.
      auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
      if (left <= 0) return false;
      pollfd p{c_.fd, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    ip.clear();
    port = 0;
    if (get(c_.fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  connection& c_;
  clock::time_point deadline_;
  std::uint64_t budget_;     // bytes this request may read in all (0: any)
  std::uint64_t taken_ = 0;  // bytes read so far
  std::size_t pos_ = 0;
  std::size_t head_size_;
  std::uint64_t rate_;
  std::chrono::milliseconds rate_after_;
  clock::time_point start_ = clock::now();
  std::uint64_t delivered_ = 0;  // bytes read, the head's included
};

}  // namespace warm::http::gate
