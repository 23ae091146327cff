#include "net/login_limiter.hpp"

#include <algorithm>
#include <cmath>

namespace warm::net {

namespace {
// The bucket every peer shares once max_peers are tracked and none can be forgotten.
const std::string overflow_peer = "*";
}  // namespace

login_limiter::login_limiter(options o) : options_(std::move(o)) {
  options_.max_peers = std::max<std::size_t>(options_.max_peers, 1);
}

void login_limiter::refill(bucket& b, clock::time_point now) const {
  double burst = options_.failures_per_minute;
  if (now > b.updated) {
    double seconds = std::chrono::duration<double>(now - b.updated).count();
    b.tokens = std::min(burst, b.tokens + seconds * burst / 60.0);
    b.updated = now;
  }
}

login_limiter::bucket& login_limiter::find(const std::string& peer, clock::time_point now) {
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_peers) {
      double burst = options_.failures_per_minute;
      for (auto i = buckets_.begin(); i != buckets_.end();) {
        refill(i->second, now);
        i = i->second.tokens >= burst ? buckets_.erase(i) : std::next(i);
      }
    }
    const std::string& key = buckets_.size() >= options_.max_peers ? overflow_peer : peer;
    it = buckets_.find(key);
    if (it == buckets_.end())
      it = buckets_.emplace(key, bucket{static_cast<double>(options_.failures_per_minute), now})
               .first;
  }
  refill(it->second, now);
  return it->second;
}

bool login_limiter::allow(const std::string& peer, const std::string& front, clock::time_point now,
                          std::chrono::seconds* retry_after) {
  if (options_.failures_per_minute == 0) return true;
  {
    std::lock_guard lock(mutex_);
    auto& b = find(peer, now);
    if (b.tokens >= 1) return true;
    if (retry_after) {
      double seconds = (1 - b.tokens) * 60.0 / options_.failures_per_minute;
      *retry_after = std::chrono::seconds(
          std::max<long long>(1, static_cast<long long>(std::ceil(seconds - 1e-6))));
    }
  }
  report(peer, front, true);
  return false;
}

void login_limiter::failed(const std::string& peer, const std::string& front,
                           clock::time_point now) {
  if (options_.failures_per_minute > 0) {
    std::lock_guard lock(mutex_);
    auto& b = find(peer, now);
    b.tokens = std::max(0.0, b.tokens - 1);
  }
  report(peer, front, false);
}

std::size_t login_limiter::peers() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

void login_limiter::report(const std::string& peer, const std::string& front, bool limited) const {
  if (options_.on_failure) options_.on_failure(peer, front, limited);
}

}  // namespace warm::net
