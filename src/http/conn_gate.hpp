// The HTTP front's connection gate: what stands between accepted sockets and the threads that
// serve requests, so that a client cannot hold a worker or unbounded memory before its request is
// complete (and, with a token, before it is authenticated).
//
// Rules, in the order a connection meets them:
//
//  1. Admission. At most max_connections are open at once, and at most
//     max_connections_per_address from one client address (an IPv4 address, or an IPv6 /64;
//     loopback addresses count like any other). The last tenth of max_connections is kept for
//     addresses with fewer than 4 connections open, so that new clients and health checkers still
//     get in while one address holds the rest. A connection over any of these is answered 503
//     and closed on arrival; refusals are logged at most once a second per address.
//  2. The head. A connection waits in the gate — one poll() thread for all of them, no worker —
//     until its request head (request line and header lines, up to the empty line) has arrived
//     whole. The head is bounded in bytes and in lines; a connection over either bound gets 431
//     and is closed; one whose head is not complete within the header timeout gets 408 and is
//     closed (the first head on a connection, sent before any token can have been checked, within
//     the shorter first_header_timeout); one that sends nothing within the idle timeout is closed.
//  3. The body. A request framed by one Content-Length whose body is within the route's limit
//     (request_class::max_body) and within max_buffered_body_bytes has its body read by the gate
//     too, on the same poll thread: its length is counted against max_buffered_body_bytes (the
//     bound on body bytes all connections' reads may hold at once) from when the gate begins
//     reading it until the worker that serves it returns. One that would pass the bound waits,
//     unpolled, until enough is given back (first come, first served); if that takes longer than
//     the body timeout it gets 503 and is closed. While read, its body must be complete within the
//     body timeout from its head, and after min_body_rate_after must have come at min_body_rate
//     on average, else 408 and close. A worker thus only gets such a request whole. Bytes that
//     arrived in the same reads as the head are the head's (bounded with it), not counted.
//     Other bodies — chunked, a repeated or malformed Content-Length, one past the route's limit
//     (which the worker refuses with 413) or past the bound — are read on the worker, under the
//     same deadline and rate rule (408), and bounded by max_request_wire_bytes.
//  4. Serving. A request goes to a worker of `threads`; a bodiless request that
//     request_class::light names (health checks, metrics) goes to its own `light_threads`, so it
//     is never queued behind the others. The worker serves that one request and gives the
//     connection back to the gate to wait for the next one (keep-alive) — unless that next head
//     (and its body, if any) arrives whole within 20 ms while no other request waits for a worker
//     of the same pool, and belongs to that pool: then the same worker serves it.
//
// TLS (a connection admitted with an ssl_server): its handshake is part of rule 2. It runs on the
// poll thread, never waiting (OpenSSL's wants to read or to write become the events polled), and
// must be complete, with the first head after it, within the first head's deadline; a connection
// that is not through it by then, or whose handshake fails (no TLS, a client certificate no
// client CA signed), is closed without an answer. A refusal by rule 1 closes a TLS connection
// without an answer too. After it, every byte the gate, the workers and the linger read or write
// goes through the connection's session (gate_connection.hpp), bytes the session already holds
// being read before any wait in poll(); the gate's own answers (408, 431, 503) are sent through
// it, and a connection is closed with a close_notify sent, never awaited.
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

namespace warm::net {
class ssl_server;
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
head_scan scan_head(std::string_view bytes, const head_limits& limits,
                    head_progress* progress = nullptr);

// A request whose head has neither Content-Length nor Transfer-Encoding has no body (RFC 9112,
// 6.3), but httplib 0.11 reads a POST's body until the connection closes (so `curl -X POST` with
// no data waited for the body deadline). Given the bytes of a complete head and where its final
// empty line starts (head_progress::line_start after a complete scan), inserts
// "Content-Length: 0" before that line in that case. Header names are matched without regard to
// case, at line starts only. Returns whether it inserted. Pure.
bool frame_bodyless_request(std::string& bytes, std::size_t empty_line_start);
// The line frame_bodyless_request inserts.
inline constexpr std::string_view bodyless_framing = "Content-Length: 0\r\n";

// What the gate reads from a complete head (its bytes up to where its final empty line starts,
// head_progress::line_start after a complete scan) to decide who reads the body. Header names are
// matched without regard to case, values with spaces and tabs around them trimmed. Pure.
struct head_facts {
  enum class framing {
    none,    // neither Content-Length nor Transfer-Encoding: no body
    length,  // exactly one Content-Length of 1 to 19 digits, and no Transfer-Encoding
    other,   // Transfer-Encoding, or a Content-Length repeated or not a plain number
  };
  std::string_view method;  // the request line's first word (a view into the bytes)
  std::string_view target;  // its second
  framing body = framing::none;
  std::uint64_t length = 0;      // with framing::length
  bool expect_continue = false;  // an "Expect: 100-continue" header line
  std::size_t size = 0;          // bytes of the head, its empty line included
};
head_facts read_head(std::string_view bytes, std::size_t empty_line_start);

// Removes the "Expect: 100-continue" header lines of a complete head (arguments as for
// frame_bodyless_request): the gate answers 100 Continue itself when it begins reading the body,
// and the server that serves the request must not answer it again. Returns the bytes removed. Pure.
std::size_t drop_expect_continue(std::string& bytes, std::size_t empty_line_start);

// What the gate needs to know of a route, from a request line (gate_options::classify).
struct request_class {
  std::uint64_t max_body = 0;  // a longer declared body is left to the worker (to refuse); 0: any
  bool light = false;          // served by the light pool when it has no body
};

struct gate_options {
  head_limits limits;
  std::chrono::milliseconds idle_timeout{
      5000};  // a waiting connection that sends nothing is closed
  std::chrono::milliseconds header_timeout{10000};  // from waiting to a complete head, else 408
  // The first head on a connection: the shorter of this and header_timeout (0: header_timeout).
  // With a token, a connection that is refused is closed after its answer, so any later head
  // comes from a client that presented the token.
  std::chrono::milliseconds first_header_timeout{5000};
  std::chrono::milliseconds body_timeout{
      60000};                                    // from a complete head to the whole body, else 408
  std::size_t max_connections = 1024;            // open at once, waiting or being served
  std::size_t max_connections_per_address = 64;  // open at once from one address; 0: no bound
  // Body bytes the gate's reads may hold at once (rule 3); 0: the gate reads no body.
  std::uint64_t max_buffered_body_bytes = 256ull << 20;
  // A body (read by the gate or by a worker) that has arrived, min_body_rate_after past the start
  // of its reading, at less than this many bytes a second on average gets 408. 0: no minimum.
  std::uint64_t min_body_rate = 16 << 10;
  std::chrono::milliseconds min_body_rate_after{2000};
  // Bytes one request may take from its connection past its head, whatever its framing (a
  // chunked body declares no length); past it a read fails and the connection is closed. 0: no
  // bound. The front sets twice its body limit plus 64 KiB, room for chunk framing, so that only
  // a body far past the limit is cut off here; routes that read bodies answer 413 at the limit.
  std::uint64_t max_request_wire_bytes = 0;
  std::uint32_t threads = 32;       // workers serving complete requests
  std::uint32_t light_threads = 2;  // workers serving light requests; 0: `threads` do
  // The route a request line names; called on the poll thread and on workers. Empty: every
  // request is of request_class{}.
  std::function<request_class(std::string_view method, std::string_view target)> classify;
  // Told of refused connections (a line each, without a trailing newline); any thread; may be
  // empty.
  std::function<void(const std::string&)> log;
};

class conn_gate {
 public:
  // Serves one request from the stream; true to keep the connection open for the next one.
  // Runs on a worker thread.
  // The stream replays the bytes the gate received, then reads the socket; reads past the body
  // deadline or below the minimum body rate fail. `stopping`: the gate is stopping, the
  // connection will be closed.
  using serve_fn = std::function<bool(httplib::Stream&, bool stopping)>;

  // Starts the poll thread and the workers. `serve` must be callable until stop() returns; it runs
  // on both pools' workers.
  conn_gate(gate_options options, serve_fn serve);
  ~conn_gate();  // stop()s if needed

  // Takes ownership of an accepted socket (answers 503 and closes it when refused by rule 1, or
  // stopped). With `tls`, the connection is served through a session of that context (borrowed
  // for the call only; the session keeps the context alive), refusals closing it unanswered.
  // Thread-safe; never blocks on the client.
  void admit(int fd, const net::ssl_server* tls = nullptr);

  // Closes every waiting connection, lets requests being served finish, joins the threads.
  void stop();

  // Connections open now, waiting or being served (for tests and metrics).
  std::size_t open_connections() const;

  // Body bytes counted against max_buffered_body_bytes now, and the most there have been at once
  // (for tests and metrics).
  std::uint64_t buffered_body_bytes() const;
  std::uint64_t peak_buffered_body_bytes() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

// On a worker, inside serve: whether a read of the current request failed for its body deadline
// or the minimum body rate (a handler answers 408 then). False on any other thread.
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
