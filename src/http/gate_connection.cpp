#include "http/gate_connection.hpp"

#include <unistd.h>

namespace warm::http {
namespace gate {

thread_local bool request_timed_out = false;
thread_local bool request_over_limit = false;
thread_local bool close_requested = false;

void close_socket(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

void answer_and_close(int fd, int status, const char* reason, const char* message) {
  std::string body = std::string("{\"error\":\"") + message + "\"}";
  std::string text = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body;
  [[maybe_unused]] auto sent = ::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  close_socket(fd);
}

clock::time_point slow_body_at(clock::time_point start, std::uint64_t body, std::uint64_t rate,
                               std::chrono::milliseconds after) {
  if (rate == 0) return clock::time_point::max();
  double seconds = std::min(double(body) / double(rate), 1e9);  // far past any deadline; no overflow
  auto earned = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  return start + std::max<clock::duration>(after, earned);
}

}  // namespace gate

bool current_request_timed_out() { return gate::request_timed_out; }
bool current_request_over_limit() { return gate::request_over_limit; }
void note_request_over_limit() { gate::request_over_limit = true; }
void close_after_answer() { gate::close_requested = true; }

}  // namespace warm::http
