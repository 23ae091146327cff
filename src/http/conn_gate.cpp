#include "http/conn_gate.hpp"

#include "http/connection_limits.hpp"
#include "http/gate_connection.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace warm::http {

using namespace gate;

struct conn_gate::impl {
  // Workers, and the dispatched requests none of them has taken yet.
  struct pool {
    explicit pool(std::size_t n) : workers(n) {}
    httplib::ThreadPool workers;
    std::atomic<std::size_t> queued{0};
  };

  gate_options options;
  serve_fn serve;
  std::unique_ptr<pool> main_pool;
  std::unique_ptr<pool> light_pool;  // null without light_threads
  int wake = -1;                     // eventfd: new arrivals, room given back, or stop
  std::thread poller;
  std::mutex mutex;
  std::vector<connection> arrived;         // under mutex
  connection_limits limits;                // rule 1: the connections open, in all and by address
  std::atomic<std::uint64_t> buffered{0};  // body bytes reserved; added on the poll thread only
  std::atomic<std::uint64_t> peak_buffered{0};
  std::deque<connection> for_room;  // poll thread: complete heads waiting for room for their bodies
  static constexpr std::chrono::milliseconds linger_time{20};
  std::atomic<bool> stopping{false};
  bool stopped = false;
  clock::time_point handshake_logged{};  // poll thread: handshake_failed's last line
  std::size_t handshakes_unlogged = 0;

  impl(gate_options o, serve_fn s)
      : options(std::move(o)),
        serve(std::move(s)),
        main_pool(std::make_unique<pool>(std::max<std::uint32_t>(1, options.threads))),
        light_pool(options.light_threads ? std::make_unique<pool>(options.light_threads) : nullptr),
        wake(::eventfd(0, EFD_CLOEXEC)),
        limits(options.max_connections, options.max_connections_per_address) {}

  void notify() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
  }

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  // Forgets a connection whose socket is closed: its counts and its room for a body.
  void forget(connection& c) {
    release(c);
    limits.forget(c.peer);
  }

  void drop(connection& c) {
    close_connection(c);
    forget(c);
  }

  void refuse(connection& c, int status, const char* reason, const char* message) {
    answer_and_close(c, status, reason, message);
    forget(c);
  }

  // A failed TLS handshake, logged at most once a second (with a count of those not logged).
  // Poll thread only.
  void handshake_failed(const connection& c, const std::string& why) {
    if (why.empty()) return;  // the client went away: nothing to tell
    auto now = clock::now();
    if (now - handshake_logged < std::chrono::seconds(1)) {
      ++handshakes_unlogged;
      return;
    }
    std::string line = "http: TLS handshake with " +
                       (c.peer.empty() ? std::string("a client") : c.peer) + " failed: " + why;
    if (handshakes_unlogged)
      line +=
          " (and " + std::to_string(handshakes_unlogged) + " more failed since the last such line)";
    handshake_logged = now;
    handshakes_unlogged = 0;
    log(line);
  }

  // Gives back the room a connection's body took; the poll thread may let a waiting body in.
  void release(connection& c) {
    if (c.reserved == 0) return;
    buffered -= c.reserved;
    c.reserved = 0;
    notify();
  }

  // Back to waiting for a head (a new connection, or one whose request was served).
  void wait_for_head(connection c) {
    c.since = clock::now();
    c.scanned = head_progress{};
    c.judged = c.pending.empty();
    c.need = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!stopping) {
        arrived.push_back(std::move(c));
        return notify();
      }
    }
    drop(c);
  }

  // The class of a complete head's request: light only when bodiless and the route says so.
  bool light(const head_facts& facts) const {
    bool bodiless = facts.body == head_facts::framing::none ||
                    (facts.body == head_facts::framing::length && facts.length == 0);
    return light_pool && bodiless && options.classify &&
           options.classify(facts.method, facts.target).light;
  }

  void dispatch(connection c, bool light_request) {
    pool& p = light_request && light_pool ? *light_pool : *main_pool;
    auto shared = std::make_shared<connection>(std::move(c));
    ++p.queued;
    p.workers.enqueue([this, shared, &p] {
      --p.queued;
      for (;;) {
        bool keep = false;
        {
          request_timed_out = request_over_limit = close_requested = false;
          head_progress head;
          std::size_t head_size = 0;
          if (scan_head(shared->pending, options.limits, &head) == head_scan::complete) {
            head_size = head.line_start + (shared->pending[head.line_start] == '\r' ? 2 : 1);
            if (frame_bodyless_request(shared->pending, head.line_start))
              head_size += bodyless_framing.size();
          }
          gate_stream stream(*shared, clock::now() + options.body_timeout,
                             options.max_request_wire_bytes, options.limits.max_bytes, head_size,
                             options.min_body_rate, options.min_body_rate_after);
          keep = serve(stream, stopping.load()) && !request_over_limit && !close_requested;
          stream.keep_unread();
          request_timed_out = request_over_limit = close_requested = false;
        }
        release(*shared);
        shared->fresh = false;
        if (!keep || stopping) break;
        switch (linger(*shared, p)) {
          case next::serve:
            continue;
          case next::wait:
            return wait_for_head(std::move(*shared));
          case next::closed:
            return;
        }
      }
      drop(*shared);
    });
  }

  enum class next { serve, wait, closed };

  // After a response, while no other connection waits for a worker of pool `p`: the next request,
  // if its head and body come whole within `linger_time` and it belongs to `p`, is served on this
  // worker (a busy kept-alive client then skips a trip through the poll thread); otherwise the
  // connection goes back to wait in the gate.
  next linger(connection& c, pool& p) {
    head_progress progress;
    auto until = clock::now() + linger_time;
    short events = POLLIN;  // what the socket is waited for
    for (;;) {
      switch (scan_head(c.pending, options.limits, &progress)) {
        case head_scan::complete: {
          auto facts = read_head(c.pending, progress.line_start);
          if (&p != main_pool.get() && !light(facts)) return next::wait;  // not the light pool's
          if (facts.body != head_facts::framing::length ||
              c.pending.size() >= facts.size + facts.length)
            return next::serve;
          break;  // its body is on its way
        }
        case head_scan::incomplete:
          break;
        default:
          return next::wait;  // the gate answers 431
      }
      auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
      if (left <= 0 || p.queued.load() > 0) return next::wait;
      if (!tls_pending(c)) {  // bytes a TLS session already holds are not waited for
        pollfd poll_fd{c.fd, events, 0};
        if (::poll(&poll_fd, 1, static_cast<int>(left)) <= 0) continue;
      }
      char buffer[16 << 10];
      auto got = receive_some(c, buffer, sizeof buffer);
      events = got.wait ? got.wait : POLLIN;
      if (got.n < 0 && got.wait) continue;
      if (got.n <= 0) {
        drop(c);
        return next::closed;
      }
      c.pending.append(buffer, static_cast<std::size_t>(got.n));
      if (c.pending.size() > options.limits.max_bytes + (64 << 10))
        return next::wait;  // the gate reads the rest
    }
  }

  // Receives what a waiting connection sent; false when it was closed or handed on.
  bool receive(connection& c) {
    std::string why;
    switch (continue_handshake(c, why)) {  // TLS: on this thread, never on a worker
      case handshake::done:
        break;
      case handshake::waiting:
        return true;
      case handshake::failed:
        handshake_failed(c, why);
        drop(c);
        return false;
    }
    if (c.need) return receive_body(c);
    char buffer[16 << 10];
    bool ended = false;
    for (;;) {
      auto got = receive_some(c, buffer, sizeof buffer);
      if (got.n < 0 && got.wait) {
        c.events = got.wait;
        break;
      }
      if (got.n <= 0) {  // end of stream or an error: a whole head sent before it is still served
        ended = true;
        break;
      }
      c.events = POLLIN;
      c.pending.append(buffer, static_cast<std::size_t>(got.n));
      if (c.pending.size() >= options.limits.max_bytes) break;  // enough to judge; never more
    }
    if (judge(c)) {
      if (!ended) return true;
      drop(c);
    }
    return false;
  }

  // Receives a body the gate reads into blocks, never past it (the room it holds); hands the
  // request on once it is whole. False when it was closed or handed on.
  bool receive_body(connection& c) {
    constexpr std::size_t block_size = 1 << 20;
    for (;;) {
      std::size_t left = c.need - c.pending.size() - c.block_bytes;
      if (c.blocks.empty() || c.blocks.back().size() == block_size) {
        c.blocks.emplace_back();
        c.blocks.back().reserve(std::min(left, block_size));
      }
      std::size_t want = std::min({sizeof body_buffer, left, block_size - c.blocks.back().size()});
      auto got = receive_some(c, body_buffer, want);
      if (got.n < 0 && got.wait) {
        c.events = got.wait;
        return true;
      }
      if (got.n <= 0) {  // the client went away before its body was whole
        drop(c);
        return false;
      }
      c.events = POLLIN;
      c.blocks.back().append(body_buffer, static_cast<std::size_t>(got.n));
      c.block_bytes += static_cast<std::size_t>(got.n);
      if (c.pending.size() + c.block_bytes >= c.need) {
        c.need = 0;
        dispatch(std::move(c), false);
        return false;
      }
    }
  }

  // Hands on, refuses or keeps a waiting connection by what it sent; true: it keeps waiting.
  bool judge(connection& c) {
    c.judged = true;
    switch (scan_head(c.pending, options.limits, &c.scanned)) {
      case head_scan::incomplete:
        return true;
      case head_scan::complete:
        return head_complete(c);
      case head_scan::too_large:
        refuse(c, 431, "Request Header Fields Too Large", "request head exceeds the size limit");
        break;
      case head_scan::too_many_lines:
        refuse(c, 431, "Request Header Fields Too Large", "request head has too many header lines");
        break;
    }
    return false;
  }

  // Rule 3 for a connection whose head is complete: hands the request on, or begins reading its
  // body (true: it keeps waiting, polled), or queues it for room to (false, as when handed on).
  bool head_complete(connection& c) {
    auto facts = read_head(c.pending, c.scanned.line_start);  // views into c.pending
    if (facts.body != head_facts::framing::length || facts.length == 0 ||
        c.pending.size() >= facts.size + facts.length) {
      const bool light_request = light(facts);  // before c moves
      dispatch(std::move(c), light_request);
      return false;
    }
    std::uint64_t limit = options.max_buffered_body_bytes;
    if (options.classify) {
      auto route = options.classify(facts.method, facts.target).max_body;
      if (route) limit = std::min(limit, route);
    }
    if (facts.length > limit) {  // the worker refuses it, or reads it under the rate rule
      dispatch(std::move(c), false);
      return false;
    }
    c.length = facts.length;
    c.expect_continue = facts.expect_continue;
    c.head_size =
        facts.size -
        (facts.expect_continue ? drop_expect_continue(c.pending, c.scanned.line_start) : 0);
    c.need = c.head_size + static_cast<std::size_t>(c.length);
    c.head_at = clock::now();
    if (for_room.empty() && fits(c.length)) {
      begin_body(c);
      return true;
    }
    for_room.push_back(std::move(c));
    return false;
  }

  bool fits(std::uint64_t length) const {
    return buffered.load() + length <= options.max_buffered_body_bytes;
  }

  // Counts a body against the bound and begins reading it.
  void begin_body(connection& c) {
    c.reserved = c.length;
    auto now_buffered = buffered += c.reserved;
    if (now_buffered > peak_buffered.load()) peak_buffered = now_buffered;
    c.reading_at = clock::now();
    if (c.expect_continue) {
      static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      auto sent = send_some(c, go_on.data(), go_on.size());
      // TLS: a record half sent must be finished before any other; the gate does not wait for it.
      if (c.ssl && sent.n != static_cast<ssize_t>(go_on.size())) c.broken = true;
    }
  }

  // Bodies waiting for room: refused once past their deadline, let in while there is room (first
  // come, first served). Lowers `next` to the soonest deadline of those that still wait.
  void let_in(std::vector<connection>& waiting, clock::time_point now, clock::time_point& next) {
    std::deque<connection> still;
    for (auto& c : for_room) {
      auto deadline = c.head_at + options.body_timeout;
      if (now >= deadline) {
        refuse(c, 503, "Service Unavailable",
               "too many request bodies are being received; try again later");
        continue;
      }
      if (still.empty() && fits(c.length)) {
        begin_body(c);
        waiting.push_back(std::move(c));
        continue;
      }
      next = std::min(next, deadline);
      still.push_back(std::move(c));
    }
    for_room.swap(still);
  }

  // Closes a waiting connection whose time is up (with 408 when it began a request); otherwise
  // lowers `next` to its next deadline. True when closed.
  bool expire(connection& c, clock::time_point now, clock::time_point& next) {
    if (c.broken) {  // TLS: its session failed, or cannot write what the gate began
      drop(c);
      return true;
    }
    if (c.need) {  // its body is being read
      auto deadline = c.head_at + options.body_timeout;
      auto received = c.pending.size() + c.block_bytes - c.head_size;
      auto slow =
          slow_body_at(c.reading_at, received, options.min_body_rate, options.min_body_rate_after);
      if (now >= deadline) {
        refuse(c, 408, "Request Timeout", "request body not received in time");
        return true;
      }
      if (now >= slow) {
        refuse(c, 408, "Request Timeout", "request body arrives too slowly");
        return true;
      }
      next = std::min({next, deadline, slow});
      return false;
    }
    auto head_timeout = options.header_timeout;
    if (c.fresh && options.first_header_timeout.count() > 0)
      head_timeout = std::min(head_timeout, options.first_header_timeout);
    // A TLS handshake counts toward the first head's deadline: it is closed, unanswered, at it.
    const bool handshaking = c.ssl && !c.handshaken;
    auto limit =
        c.since + (c.pending.empty() && !handshaking ? options.idle_timeout : head_timeout);
    if (now >= limit) {
      if (c.pending.empty())
        drop(c);
      else
        refuse(c, 408, "Request Timeout", "request head not received in time");
      return true;
    }
    next = std::min(next, limit);
    return false;
  }

  void run() {
    std::vector<connection> waiting;
    std::vector<connection> still;
    std::vector<pollfd> polled;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto& c : arrived)
          waiting.push_back(std::move(c));
        arrived.clear();
      }
      if (stopping) break;
      auto now = clock::now();
      auto next = now + std::chrono::seconds(1);
      let_in(waiting, now, next);
      still.clear();
      for (auto& c : waiting) {
        if (!c.judged && !judge(c)) continue;  // bytes left from the last request
        if (!expire(c, now, next)) still.push_back(std::move(c));
      }
      waiting.swap(still);
      polled.assign(1, pollfd{wake, POLLIN, 0});
      bool held = false;  // a TLS session holds bytes poll() does not see: do not wait
      for (auto& c : waiting) {
        polled.push_back(pollfd{c.fd, c.events, 0});
        held = held || tls_pending(c);
      }
      auto timeout =
          std::chrono::duration_cast<std::chrono::milliseconds>(next - clock::now()).count() + 1;
      int r = ::poll(polled.data(), polled.size(),
                     held ? 0 : static_cast<int>(std::max<long long>(0, timeout)));
      if (r < 0 && errno != EINTR) break;
      if (r < 0 || (r == 0 && !held)) continue;
      if (polled[0].revents) {
        std::uint64_t count;
        [[maybe_unused]] auto n = ::read(wake, &count, sizeof count);
      }
      still.clear();
      for (std::size_t i = 0; i < waiting.size(); ++i) {
        bool ready = polled[i + 1].revents != 0 || tls_pending(waiting[i]);
        if (!ready || receive(waiting[i])) still.push_back(std::move(waiting[i]));
      }
      waiting.swap(still);
    }
    for (auto& c : for_room)
      drop(c);  // stopping: a body not read is not served
    for_room.clear();
    for (auto& c :
         waiting) {  // a whole head already here (and no body left to read) is still served
      if (!c.need && scan_head(c.pending, options.limits, &c.scanned) == head_scan::complete) {
        dispatch(std::move(c), false);
      } else {
        drop(c);
      }
    }
  }

  char body_buffer[64 << 10];  // the poll thread's, for receive_body
};

conn_gate::conn_gate(gate_options options, serve_fn serve)
    : impl_(std::make_unique<impl>(std::move(options), std::move(serve))) {
  auto* raw = impl_.get();
  impl_->poller = std::thread([raw] { raw->run(); });
}

conn_gate::~conn_gate() {
  stop();
}

void conn_gate::admit(int fd, const net::ssl_server* tls) {
  // A TLS client waits for a handshake: a refusal in clear text would only confuse it.
  auto refuse = [fd, tls](const char* message) {
    if (tls) return close_socket(fd);
    answer_and_close(fd, 503, "Service Unavailable", message);
  };
  if (impl_->stopping) return refuse("too many open connections");
  connection c;
  c.fd = fd;
  c.peer = address_of(fd);
  std::string line;
  auto admitted = impl_->limits.admit(c.peer, line);
  if (!line.empty()) impl_->log(line);
  if (admitted == connection_limits::admission::full) return refuse("too many open connections");
  if (admitted == connection_limits::admission::address_full)
    return refuse("too many open connections from this address");
  if (tls && !(c.ssl = tls->open(fd))) return impl_->drop(c);  // out of memory
  impl_->wait_for_head(std::move(c));
}

void conn_gate::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->notify();
  if (impl_->poller.joinable()) impl_->poller.join();
  for (auto& c : impl_->arrived)
    impl_->drop(c);
  impl_->arrived.clear();
  impl_->main_pool->workers.shutdown();  // requests being served finish; their connections close
  if (impl_->light_pool) impl_->light_pool->workers.shutdown();
  ::close(impl_->wake);
}

std::size_t conn_gate::open_connections() const {
  return impl_->limits.open();
}
std::uint64_t conn_gate::buffered_body_bytes() const {
  return impl_->buffered.load();
}
std::uint64_t conn_gate::peak_buffered_body_bytes() const {
  return impl_->peak_buffered.load();
}

}  // namespace warm::http
