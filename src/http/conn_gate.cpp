#include "http/conn_gate.hpp"

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
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace warm::http {

head_scan scan_head(std::string_view bytes, const head_limits& limits, head_progress* progress) {
  head_progress local;
  auto& p = progress ? *progress : local;
  for (; p.scanned < bytes.size() && p.scanned < limits.max_bytes; ++p.scanned) {
    std::size_t i = p.scanned;
    if (bytes[i] != '\n') continue;
    std::size_t length = i - p.line_start;
    if (length > 0 && bytes[i - 1] == '\r') --length;
    if (length == 0) return head_scan::complete;
    if (++p.lines > limits.max_lines) return head_scan::too_many_lines;
    p.line_start = i + 1;
  }
  return bytes.size() >= limits.max_bytes ? head_scan::too_large : head_scan::incomplete;
}

namespace {

using clock = std::chrono::steady_clock;

thread_local bool request_timed_out = false;
thread_local bool request_over_limit = false;
thread_local bool close_requested = false;  // close_after_answer()

void close_socket(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

// Best effort: a short answer to a connection about to be closed, never blocking.
void answer_and_close(int fd, int status, const char* reason, const char* message) {
  std::string body = std::string("{\"error\":\"") + message + "\"}";
  std::string text = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body;
  [[maybe_unused]] auto sent = ::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close_socket(fd);
}

// A connection's socket and the bytes received from it that no request has consumed yet.
struct connection {
  int fd = -1;
  std::string pending;
  clock::time_point since;  // when it began waiting for a head
  head_progress scanned;    // of pending, while it waits
  bool judged = false;      // pending (bytes left from the last request) looked at since
};

// What a worker serves one request from: the pending bytes, then the socket, every read bounded
// by the request's deadline.
class gate_stream final : public httplib::Stream {
 public:
  // `budget`: the bytes this request may read past its head (the head's own bound on top); 0: any.
  gate_stream(connection& c, clock::time_point deadline, std::uint64_t budget, std::size_t head_bytes)
      : c_(c), deadline_(deadline), budget_(budget ? budget + head_bytes : 0) {}

  bool is_readable() const override { return pos_ < c_.pending.size() || wait(POLLIN, deadline_); }
  bool is_writable() const override { return wait(POLLOUT, clock::now() + write_timeout); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (pos_ >= c_.pending.size()) {
      c_.pending.clear();
      pos_ = 0;
      if (!wait(POLLIN, deadline_)) {
        if (clock::now() >= deadline_) request_timed_out = true;
        return -1;
      }
      char buffer[16 << 10];
      ssize_t n;
      do n = ::recv(c_.fd, buffer, sizeof buffer, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      c_.pending.assign(buffer, static_cast<std::size_t>(n));
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
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (!wait(POLLOUT, clock::now() + write_timeout)) return -1;
    ssize_t n;
    do n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return c_.fd; }

  // The bytes received but not consumed (a pipelined next request) go back to the connection.
  void keep_unread() { c_.pending.erase(0, pos_); }

 private:
  static constexpr std::chrono::seconds write_timeout{5};

  bool wait(short events, clock::time_point until) const {
    for (;;) {
      // Rounded up: false only once `until` has passed, so a caller can tell a deadline by the clock.
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
};

}  // namespace

bool frame_bodyless_request(std::string& bytes, std::size_t empty_line_start) {
  auto names = [](std::string_view line, std::string_view name) {
    if (line.size() <= name.size() || line[name.size()] != ':') return false;
    for (std::size_t i = 0; i < name.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
    return true;
  };
  std::string_view head(bytes.data(), std::min(empty_line_start, bytes.size()));
  auto first = head.find('\n');  // the request line is no header
  for (std::size_t at = first == std::string_view::npos ? head.size() : first + 1; at < head.size();) {
    auto end = head.find('\n', at);
    auto line = head.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (names(line, "content-length") || names(line, "transfer-encoding")) return false;
    at = end == std::string_view::npos ? head.size() : end + 1;
  }
  bytes.insert(head.size(), "Content-Length: 0\r\n");
  return true;
}

bool current_request_timed_out() { return request_timed_out; }
bool current_request_over_limit() { return request_over_limit; }
void note_request_over_limit() { request_over_limit = true; }
void close_after_answer() { close_requested = true; }

struct conn_gate::impl {
  gate_options options;
  serve_fn serve;
  httplib::ThreadPool workers;
  int wake = -1;  // eventfd: new arrivals or stop
  std::thread poller;
  std::mutex mutex;
  std::vector<connection> arrived;  // under mutex
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> queued{0};  // dispatched requests no worker has taken yet
  static constexpr std::chrono::milliseconds linger_time{20};
  std::atomic<bool> stopping{false};
  bool stopped = false;

  impl(gate_options o, serve_fn s)
      : options(o), serve(std::move(s)), workers(std::max<std::uint32_t>(1, o.threads)), wake(::eventfd(0, EFD_CLOEXEC)) {}

  void notify() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
  }

  // Back to waiting for a head (a new connection, or one whose request was served).
  void wait_for_head(connection c) {
    c.since = clock::now();
    c.scanned = head_progress{};
    c.judged = c.pending.empty();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!stopping) {
        arrived.push_back(std::move(c));
        c.fd = -1;
      }
    }
    if (c.fd >= 0) {
      close_socket(c.fd);
      --open;
      return;
    }
    notify();
  }

  void dispatch(connection c) {
    auto shared = std::make_shared<connection>(std::move(c));
    ++queued;
    workers.enqueue([this, shared] {
      --queued;
      for (;;) {
        bool keep = false;
        {
          request_timed_out = request_over_limit = close_requested = false;
          head_progress head;
          if (scan_head(shared->pending, options.limits, &head) == head_scan::complete)
            frame_bodyless_request(shared->pending, head.line_start);
          gate_stream stream(*shared, clock::now() + options.body_timeout, options.max_request_wire_bytes,
                             options.limits.max_bytes);
          keep = serve(stream, stopping.load()) && !request_over_limit && !close_requested;
          stream.keep_unread();
          request_timed_out = request_over_limit = close_requested = false;
        }
        if (!keep || stopping) break;
        switch (linger(*shared)) {
          case next::serve: continue;
          case next::wait: return wait_for_head(std::move(*shared));
          case next::closed: return;
        }
      }
      close_socket(shared->fd);
      --open;
    });
  }

  enum class next { serve, wait, closed };

  // After a response, while no other connection waits for a worker: the next head, if it comes
  // whole within `linger_time`, is served on this worker (a busy kept-alive client then skips a
  // trip through the poll thread); otherwise the connection goes back to wait in the gate.
  next linger(connection& c) {
    head_progress progress;
    auto until = clock::now() + linger_time;
    for (;;) {
      switch (scan_head(c.pending, options.limits, &progress)) {
        case head_scan::complete: return next::serve;
        case head_scan::incomplete: break;
        default: return next::wait;  // the gate answers 431
      }
      auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
      if (left <= 0 || queued.load() > 0) return next::wait;
      pollfd p{c.fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[16 << 10];
      ssize_t n = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        close_socket(c.fd);
        --open;
        return next::closed;
      }
      c.pending.append(buffer, static_cast<std::size_t>(n));
    }
  }

  // Receives what a waiting connection sent; false when it was closed or handed on.
  bool receive(connection& c) {
    char buffer[16 << 10];
    bool ended = false;
    for (;;) {
      ssize_t n = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {  // end of stream or an error: a whole head sent before it is still served
        ended = true;
        break;
      }
      c.pending.append(buffer, static_cast<std::size_t>(n));
      if (c.pending.size() >= options.limits.max_bytes) break;  // enough to judge; never more
    }
    if (judge(c)) {
      if (!ended) return true;
      close_socket(c.fd);
      --open;
    }
    return false;
  }

  // Hands on, refuses or keeps a waiting connection by what it sent; true: it keeps waiting.
  bool judge(connection& c) {
    c.judged = true;
    switch (scan_head(c.pending, options.limits, &c.scanned)) {
      case head_scan::incomplete: return true;
      case head_scan::complete: dispatch(std::move(c)); return false;
      case head_scan::too_large:
        answer_and_close(c.fd, 431, "Request Header Fields Too Large", "request head exceeds the size limit");
        break;
      case head_scan::too_many_lines:
        answer_and_close(c.fd, 431, "Request Header Fields Too Large", "request head has too many header lines");
        break;
    }
    --open;
    return false;
  }

  void run() {
    std::vector<connection> waiting;
    std::vector<pollfd> polled;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto& c : arrived) waiting.push_back(std::move(c));
        arrived.clear();
      }
      if (stopping) break;
      // A connection whose bytes already hold a whole head (pipelined) goes on at once.
      auto now = clock::now();
      auto next = now + std::chrono::seconds(1);
      std::vector<connection> still;
      for (auto& c : waiting) {
        if (!c.judged && !judge(c)) continue;  // bytes left from the last request
        auto limit = c.since + (c.pending.empty() ? options.idle_timeout : options.header_timeout);
        if (now >= limit) {
          if (c.pending.empty()) close_socket(c.fd);
          else answer_and_close(c.fd, 408, "Request Timeout", "request head not received in time");
          --open;
          continue;
        }
        next = std::min(next, limit);
        still.push_back(std::move(c));
      }
      waiting.swap(still);
      polled.assign(1, pollfd{wake, POLLIN, 0});
      for (auto& c : waiting) polled.push_back(pollfd{c.fd, POLLIN, 0});
      auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(next - clock::now()).count() + 1;
      int r = ::poll(polled.data(), polled.size(), static_cast<int>(std::max<long long>(0, timeout)));
      if (r < 0 && errno != EINTR) break;
      if (r <= 0) continue;
      if (polled[0].revents) {
        std::uint64_t count;
        [[maybe_unused]] auto n = ::read(wake, &count, sizeof count);
      }
      still.clear();
      for (std::size_t i = 0; i < waiting.size(); ++i) {
        if (polled[i + 1].revents == 0 || receive(waiting[i])) still.push_back(std::move(waiting[i]));
      }
      waiting.swap(still);
    }
    for (auto& c : waiting) {  // stopping: a whole head already here is still served
      if (scan_head(c.pending, options.limits, &c.scanned) == head_scan::complete) {
        dispatch(std::move(c));
      } else {
        close_socket(c.fd);
        --open;
      }
    }
  }
};

conn_gate::conn_gate(gate_options options, serve_fn serve) : impl_(std::make_unique<impl>(options, std::move(serve))) {
  auto* raw = impl_.get();
  impl_->poller = std::thread([raw] { raw->run(); });
}

conn_gate::~conn_gate() { stop(); }

void conn_gate::admit(int fd) {
  if (impl_->stopping || impl_->open.load() >= impl_->options.max_connections) {
    answer_and_close(fd, 503, "Service Unavailable", "too many open connections");
    return;
  }
  ++impl_->open;
  connection c;
  c.fd = fd;
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
  for (auto& c : impl_->arrived) {
    close_socket(c.fd);
    --impl_->open;
  }
  impl_->arrived.clear();
  impl_->workers.shutdown();  // requests being served finish; their connections close
  ::close(impl_->wake);
}

std::size_t conn_gate::open_connections() const { return impl_->open.load(); }

}  // namespace warm::http
