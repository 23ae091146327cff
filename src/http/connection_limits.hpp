// Rule 1 of the HTTP front's connection gate (conn_gate.hpp): how many connections may be open,
// in all and from one client address. At most max_connections are open at once and at most
// max_connections_per_address from one address (0: no bound per address); the last tenth of
// max_connections is kept for addresses with fewer than few_connections open, so one client
// cannot take the whole front. A refusal is logged at most once a second per address (and once
// a second for the limit on all), with a count of those not logged. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace warm::http {

class connection_limits {
 public:
  enum class admission { admitted, full, address_full };
  static constexpr std::size_t few_connections = 4;

  connection_limits(std::size_t max_connections, std::size_t max_per_address)
      : max_(max_connections), max_per_address_(max_per_address) {}

  // A connection from `peer` (address_of; empty for a unix socket, which only the limit on all
  // bounds): counted when admitted. A line to log, if any, goes to `line`.
  admission admit(const std::string& peer, std::string& line);
  // An admitted connection from `peer` closed.
  void forget(const std::string& peer);
  // Connections admitted and not yet forgotten.
  std::size_t open() const;

 private:
  using clock = std::chrono::steady_clock;
  // An address's open connections, and its refusals not logged yet (at most a line a second).
  struct address_count {
    std::size_t open = 0;
    clock::time_point logged{};
    std::size_t unlogged = 0;
  };

  const std::size_t max_;
  const std::size_t max_per_address_;
  mutable std::mutex mutex_;
  std::size_t open_ = 0;
  std::unordered_map<std::string, address_count> by_address_;  // open > 0 only
  address_count over_all_;                                     // refusals for max_connections
};

// The address a connection counts against: an IPv4 address, or the /64 prefix of an IPv6 one
// (one client commonly holds a whole /64); an IPv4-mapped IPv6 address as IPv4. Empty when the
// socket has no IP peer (a unix socket).
std::string address_of(int fd);

}  // namespace warm::http
