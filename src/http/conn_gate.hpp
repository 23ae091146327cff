// The HTTP front's connection gate: what stands between accepted sockets and the threads that
// serve requests, so that a client cannot hold a worker or unbounded memory before its request is
// complete (and, with a token, before it is authenticated).
//
// A connection waits in the gate — one poll() thread for all of them, no worker — until its
// request head (request line and header lines, up to the empty line) has arrived whole. The head
// is bounded in bytes and in lines; a connection over either bound gets 431 and is closed; one
// whose head is not complete within the header timeout gets 408 and is closed; one that sends
// nothing within the idle timeout is closed. Only then is it handed to a worker, which serves that
// one request (its body must arrive before the body deadline) and gives the connection back to
// the gate to wait for the next one (keep-alive) — unless that next head arrives whole within
// 20 ms while no other request waits for a worker: then the same worker serves it. At most max_connections are open at once; more
// are closed on arrival with 503.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace httplib {
class Stream;
}

namespace warm::http {

// Bounds on a request head, checked before anything parses it.
struct head_limits {
  std::size_t max_bytes = 32 << 10;  // request line + header lines + the empty line
  std::size_t max_lines = 100;       // request line + header lines
};

enum class head_scan {
  incomplete,      // no empty line yet, and within the bounds
  complete,        // an empty line ends the head within the bounds
  too_large,       // more than max_bytes before the empty line
  too_many_lines,  // more than max_lines before the empty line
};

// How far a scan got, so that the next one (with more bytes appended) reads each byte once.
struct head_progress {
  std::size_t scanned = 0;     // bytes already read
  std::size_t line_start = 0;  // where the line being read begins
  std::size_t lines = 0;       // lines ended so far
};

// Where the bytes received so far on a connection stand. Lines end with "\n" (an "\r" before it
// is part of the line ending); the head ends with the first empty line. Pure; never reads past
// `bytes`. With `progress`, resumes where the last scan of a prefix of `bytes` stopped.
head_scan scan_head(std::string_view bytes, const head_limits& limits, head_progress* progress = nullptr);

// A request whose head has neither Content-Length nor Transfer-Encoding has no body (RFC 9112,
// 6.3), but httplib 0.11 reads a POST's body until the connection closes (so `curl -X POST` with
// no data waited for the body deadline). Given the bytes of a complete head and where its final
// empty line starts (head_progress::line_start after a complete scan), inserts
// "Content-Length: 0" before that line in that case. Header names are matched without regard to
// case, at line starts only. Returns whether it inserted. Pure.
bool frame_bodyless_request(std::string& bytes, std::size_t empty_line_start);

struct gate_options {
  head_limits limits;
  std::chrono::milliseconds idle_timeout{5000};     // a waiting connection that sends nothing is closed
  std::chrono::milliseconds header_timeout{10000};  // from waiting to a complete head, else 408
  std::chrono::milliseconds body_timeout{60000};    // from a complete head to the whole body
  std::size_t max_connections = 1024;               // open at once, waiting or being served
  // Bytes one request may take from its connection past its head, whatever its framing (a
  // chunked body declares no length); past it a read fails and the connection is closed. 0: no
  // bound. The front sets twice its body limit plus 64 KiB, room for chunk framing, so that only
  // a body far past the limit is cut off here; routes that read bodies answer 413 at the limit.
  std::uint64_t max_request_wire_bytes = 0;
  std::uint32_t threads = 32;                       // workers serving complete requests
};

class conn_gate {
 public:
  // Serves one request from the stream; true to keep the connection open for the next one.
  // Runs on a worker thread.
  // The stream replays the bytes the gate received, then reads the socket; reads past the body
  // deadline fail. `stopping`: the gate is stopping, the connection will be closed.
  using serve_fn = std::function<bool(httplib::Stream&, bool stopping)>;

  // Starts the poll thread and the workers. `serve` must be callable until stop() returns.
  conn_gate(gate_options options, serve_fn serve);
  ~conn_gate();  // stop()s if needed

  // Takes ownership of an accepted socket (closes it when over max_connections or stopped).
  // Thread-safe; never blocks on the client.
  void admit(int fd);

  // Closes every waiting connection, lets requests being served finish, joins the threads.
  void stop();

  // Connections open now, waiting or being served (for tests and metrics).
  std::size_t open_connections() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

// On a worker, inside serve: whether a read of the current request failed for its body deadline
// (a handler answers 408 then). False on any other thread.
bool current_request_timed_out();

// On a worker, inside serve: whether the current request's body was left unread because it went
// past a size limit: the gate's wire bound, or a handler that stopped reading and called
// note_request_over_limit(). The connection is closed after the answer (413). False elsewhere.
bool current_request_over_limit();
void note_request_over_limit();

// On a worker, inside serve: closes the connection once the current request is answered (a
// client that is refused for want of a token keeps no connection). Nothing elsewhere.
void close_after_answer();

}  // namespace warm::http
