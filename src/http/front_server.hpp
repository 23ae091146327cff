// The HTTP front's servers (internal to src/http): httplib's server with its sockets routed
// through the connection gate, and the front's own accept loop.
#pragma once

#include <httplib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "http/conn_gate.hpp"
#include "net/tls_server.hpp"

namespace warm::http::front_detail {

// Runs each task where it is enqueued: httplib's accept loop hands every socket to the gate, which
// returns at once (conn_gate.hpp); the gate's own workers serve requests.
class inline_queue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// httplib's server with its sockets routed through a conn_gate: a worker is taken only by a
// connection whose request head has arrived whole, within its bounds.
class gated_server final : public httplib::Server {
 public:
  void start_gate(gate_options o) {
    gate_ =
        std::make_unique<conn_gate>(std::move(o), [this](httplib::Stream& stream, bool stopping) {
          bool closed = false;
          bool served = process_request(stream, stopping, closed, [](httplib::Request&) {});
          return served && !closed &&
                 !current_request_timed_out();  // a timed-out body is not read to its end
        });
    new_task_queue = [] { return new inline_queue; };
  }
  void stop_gate() {
    if (gate_) gate_->stop();
  }
  // Hands an accepted socket of the front's listener to the gate, served through `tls` if any.
  void admit(int fd, const net::ssl_server* tls) { gate_->admit(fd, tls); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate_->admit(sock);
    return true;
  }

  std::unique_ptr<conn_gate> gate_;
};

// Accepts on a listening socket (net/listen.hpp) until stop(), handing each connection to `take`
// on its own thread: the front's own accept loop, so that the listen backlog is the system's and
// a unix socket can be served (httplib's backlog is 5, and it cannot listen on a unix socket). An
// accept that fails for want of descriptors or memory is logged and retried after a pause that
// doubles from 10 ms to 1 s: the waiting connections stay in the backlog.
class socket_acceptor {
 public:
  socket_acceptor(int listen_fd, bool tcp, std::function<void(int)> take,
                  std::function<void(const std::string&)> log)
      : listen_fd_(listen_fd),
        tcp_(tcp),
        wake_(::eventfd(0, EFD_CLOEXEC)),
        take_(std::move(take)),
        log_(std::move(log)),
        thread_([this] { run(); }) {}
  ~socket_acceptor() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    std::uint64_t one = 1;
    while (::write(wake_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    thread_.join();
    ::close(listen_fd_);
    ::close(wake_);
  }

 private:
  void run();  // the accept loop, on thread_

  int listen_fd_;
  bool tcp_;
  int wake_;
  std::function<void(int)> take_;
  std::function<void(const std::string&)> log_;
  std::thread thread_;
};

}  // namespace warm::http::front_detail
