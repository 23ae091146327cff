#include "http/connection_limits.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace warm::http {

connection_limits::admission connection_limits::admit(const std::string& peer, std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto now = clock::now();
  auto found = by_address_.find(peer);
  std::size_t from_peer = found == by_address_.end() ? 0 : found->second.open;
  const std::size_t reserve = max_ / 10;
  std::string reason;
  address_count* counted = &over_all_;
  auto refused = admission::address_full;
  if (open_ >= max_) {
    refused = admission::full;
    reason = std::to_string(open_) + " connections are open (max_connections)";
  } else if (!peer.empty() && max_per_address_ && from_peer >= max_per_address_) {
    reason =
        std::to_string(from_peer) + " connections are open from it (max_connections_per_address)";
    counted = &found->second;
  } else if (!peer.empty() && open_ >= max_ - reserve && from_peer >= few_connections) {
    reason = std::to_string(from_peer) + " connections are open from it, and the last " +
             std::to_string(reserve) + " of " + std::to_string(max_) +
             " are kept for addresses with fewer than " + std::to_string(few_connections);
    counted = &found->second;
  } else {
    ++open_;
    ++by_address_[peer].open;
    return admission::admitted;
  }
  if (now - counted->logged >= std::chrono::seconds(1)) {
    line = "http: refusing a connection from " + (peer.empty() ? std::string("a client") : peer) +
           ": " + reason;
    if (counted->unlogged)
      line += " (and " + std::to_string(counted->unlogged) + " more since the last such line)";
    counted->logged = now;
    counted->unlogged = 0;
  } else {
    ++counted->unlogged;
  }
  return refused;
}

void connection_limits::forget(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = by_address_.find(peer); found != by_address_.end() && --found->second.open == 0)
    by_address_.erase(found);
  --open_;
}

std::size_t connection_limits::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

std::string address_of(int fd) {
  sockaddr_storage a{};
  socklen_t length = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, text, sizeof text);
    return text;
  }
  if (a.ss_family != AF_INET6) return {};
  in6_addr v6 = reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    ::inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof text);
    return text;
  }
  std::memset(&v6.s6_addr[8], 0, 8);
  ::inet_ntop(AF_INET6, &v6, text, sizeof text);
  return std::string(text) + "/64";
}

}  // namespace warm::http
