// Failed logins, counted and rate-limited per peer address: shared by warmd's two authenticated
// fronts (the Cap'n Proto authenticator, src/rpc/authenticator.cpp, and the HTTP front's bearer
// token, src/http/http_front.cpp), so a peer's budget is the same whichever front it guesses on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace warm::net {

// A token bucket per peer: a peer may fail `failures_per_minute` logins at once, then one more
// each 60 / failures_per_minute seconds. The fronts compare the token first and ask allow() only
// for a wrong one: while its bucket is empty a peer's wrong tokens are refused as limited (the
// refusal says when to retry), while the right token is always taken (a shared address, a NAT
// or a proxy, keeps its good clients); successful logins cost nothing.
//
// Contract:
//  1. Memory is bounded: at most `max_peers` peers are tracked. A new peer past that first
//     forgets the peers whose bucket has refilled; if all are still limited, it shares one
//     overflow bucket with every other untracked peer (so spraying addresses gains nothing).
//  2. Time is given, never read: the caller passes `now` (tests use a fake clock).
//  3. Thread-safe: every member may be called from any thread; `on_failure` is called outside
//     the lock, on the calling thread.
class login_limiter {
 public:
  using clock = std::chrono::steady_clock;

  struct options {
    std::uint32_t failures_per_minute =
        10;                        // a peer's budget (0: no limit, failures still reported)
    std::size_t max_peers = 4096;  // peers tracked at once (at least 1)
    // Told of each failure: the peer, the front ("rpc", "http"), and whether the attempt was
    // refused by the limit (true) or was a wrong token (false). Never sees the token.
    std::function<void(const std::string& peer, const std::string& front, bool limited)> on_failure;
  };

  explicit login_limiter(options o);

  // Whether `peer` may present a token at `now`. When it may not, reports a limited failure and
  // sets `retry_after` (whole seconds, at least 1) when given.
  bool allow(const std::string& peer, const std::string& front, clock::time_point now,
             std::chrono::seconds* retry_after = nullptr);

  // Records a wrong token from `peer` at `now`: takes one attempt from its budget and reports it.
  void failed(const std::string& peer, const std::string& front, clock::time_point now);

  // Peers tracked now (for the memory bound's tests).
  std::size_t peers() const;

 private:
  struct bucket {
    double tokens = 0;
    clock::time_point updated;
  };
  // The bucket of `peer`, refilled to `now`; creates it (full) if needed. Lock held.
  bucket& find(const std::string& peer, clock::time_point now);
  void refill(bucket& b, clock::time_point now) const;
  void report(const std::string& peer, const std::string& front, bool limited) const;

  options options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, bucket> buckets_;  // guarded by mutex_
};

}  // namespace warm::net
