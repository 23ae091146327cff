#include "http/gate_connection.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <climits>
#include <cstring>

namespace warm::http {
namespace gate {

namespace {

std::string answer_text(int status, const char* reason, const char* message) {
  std::string body = std::string("{\"error\":\"") + message + "\"}";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// What a session call that returned `result` (not > 0) means. A failure marks the connection
// broken and clears this thread's OpenSSL errors (SSL_get_error reads that queue).
io_result tls_outcome(connection& c, int result) {
  switch (SSL_get_error(c.ssl.get(), result)) {
    case SSL_ERROR_WANT_READ:
      return {-1, POLLIN};
    case SSL_ERROR_WANT_WRITE:
      return {-1, POLLOUT};
    // close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) the stream's end without one
    case SSL_ERROR_ZERO_RETURN:
      return {0, 0};
    default:
      c.broken = true;
      ERR_clear_error();
      return {-1, 0};
  }
}

}  // namespace

thread_local bool request_timed_out = false;
thread_local bool request_over_limit = false;
thread_local bool close_requested = false;

void close_socket(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

void answer_and_close(int fd, int status, const char* reason, const char* message) {
  std::string text = answer_text(status, reason, message);
  [[maybe_unused]] auto sent = ::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close_socket(fd);
}

io_result receive_some(connection& c, char* buffer, std::size_t size) {
  if (c.broken) return {-1, 0};
  if (!c.ssl) {
    ssize_t n;
    do
      n = ::recv(c.fd, buffer, size, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {-1, POLLIN};
    return {n, 0};
  }
  ERR_clear_error();
  int n = SSL_read(c.ssl.get(), buffer, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  return n > 0 ? io_result{n, 0} : tls_outcome(c, n);
}

io_result send_some(connection& c, const char* data, std::size_t size) {
  if (c.broken) return {-1, 0};
  if (!c.ssl) {
    ssize_t n;
    do
      n = ::send(c.fd, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {-1, POLLOUT};
    return {n, 0};
  }
  ERR_clear_error();
  int n = SSL_write(c.ssl.get(), data, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  if (n > 0) return {n, 0};
  auto out = tls_outcome(c, n);
  if (out.n == 0) {  // the session is closed: a write that moves nothing is a failure, not a retry
    c.broken = true;
    out.n = -1;
  }
  return out;
}

bool tls_pending(const connection& c) {
  return c.ssl && !c.broken && SSL_pending(c.ssl.get()) > 0;
}

handshake continue_handshake(connection& c, std::string& why) {
  if (!c.ssl || c.handshaken) return handshake::done;
  ERR_clear_error();
  int result = SSL_accept(c.ssl.get());
  if (result == 1) {
    c.handshaken = true;
    c.events = POLLIN;
    return handshake::done;
  }
  int error = SSL_get_error(c.ssl.get(), result);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    c.events = error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    return handshake::waiting;
  }
  c.broken = true;
  if (error == SSL_ERROR_SSL) {
    why = net::tls_error_text();
    long verified = SSL_get_verify_result(c.ssl.get());
    if (verified != X509_V_OK)
      why += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
  } else {
    why.clear();  // the client went away (SSL_ERROR_SYSCALL, ZERO_RETURN): nothing to tell
    ERR_clear_error();
  }
  return handshake::failed;
}

void close_connection(connection& c) {
  if (c.ssl) {
    ERR_clear_error();
    if (c.handshaken && !c.broken) SSL_shutdown(c.ssl.get());  // sends close_notify; never waits
    ERR_clear_error();
    c.ssl.reset();
  }
  if (c.fd >= 0) close_socket(c.fd);
  c.fd = -1;
}

void answer_and_close(connection& c, int status, const char* reason, const char* message) {
  if (!c.ssl) {
    if (c.fd >= 0) answer_and_close(c.fd, status, reason, message);
    c.fd = -1;
    return;
  }
  if (c.handshaken) {
    std::string text = answer_text(status, reason, message);
    if (send_some(c, text.data(), text.size()).n < 0)
      c.broken = true;  // a record may wait half sent
  }
  close_connection(c);
}

clock::time_point slow_body_at(clock::time_point start, std::uint64_t body, std::uint64_t rate,
                               std::chrono::milliseconds after) {
  if (rate == 0) return clock::time_point::max();
  double seconds =
      std::min(double(body) / double(rate), 1e9);  // far past any deadline; no overflow
  auto earned = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  return start + std::max<clock::duration>(after, earned);
}

}  // namespace gate

bool current_request_timed_out() {
  return gate::request_timed_out;
}
bool current_request_over_limit() {
  return gate::request_over_limit;
}
void note_request_over_limit() {
  gate::request_over_limit = true;
}
void close_after_answer() {
  gate::close_requested = true;
}

}  // namespace warm::http
