// An in-memory object store for tests of what sits on src/sources' object_store: objects by URL,
// with entity tags that change on every put, counts of the calls, a gate that holds fetches until
// opened, and scripted failures. Thread-safe (fetches run on other threads).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "sources/object_store.hpp"

namespace warm::test {

class fake_store final : public sources::object_store {
 public:
  // Stores `bytes` at `url` with a new entity tag.
  void put(const std::string& url, std::string bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_[url] = {std::move(bytes), "etag-" + std::to_string(++tags_)};
  }
  void erase(const std::string& url) {
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.erase(url);
  }
  // Fetches wait until open_gate() while the gate is closed.
  void close_gate() {
    std::lock_guard<std::mutex> lock(mutex_);
    gate_open_ = false;
  }
  void open_gate() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gate_open_ = true;
    }
    opened_.notify_all();
  }
  // The next `n` fetches fail with `why`.
  void fail_fetches(int n, error why) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_ = n;
    failure_ = std::move(why);
  }
  // Runs once inside the next fetch, after its first half was delivered (e.g. a put that replaces
  // the object mid-fetch).
  void during_next_fetch(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mutex_);
    during_ = std::move(f);
  }
  int fetches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fetches_;
  }
  int heads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return heads_;
  }

  expected<std::vector<sources::object_info>> list(const sources::object_url& prefix) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto p = prefix.to_string();
    std::vector<sources::object_info> out;
    for (const auto& [url, o] : objects_)
      if (url.compare(0, p.size(), p) == 0) out.push_back(info(url, o));
    return out;
  }

  expected<sources::object_info> head(const sources::object_url& url) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++heads_;
    auto it = objects_.find(url.to_string());
    if (it == objects_.end()) return make_error(errc::not_found, url.to_string() + ": 404");
    return info(it->first, it->second);
  }

  expected<sources::fetch_stats> fetch(const sources::object_info& object,
                                       const sources::fetch_sink& sink,
                                       const sources::fetch_options& options) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++fetches_;
    opened_.wait(lock, [&] { return gate_open_; });
    if (failures_ > 0) {
      --failures_;
      return failure_;
    }
    auto it = objects_.find(object.url.to_string());
    if (it == objects_.end()) return make_error(errc::not_found, "404");
    sources::fetch_stats stats;
    if (it->second.etag != object.etag) {
      stats.changed = true;
      return stats;
    }
    // A prefix fetch delivers only the object's first bytes.
    const std::string bytes =
        options.prefix_bytes ? it->second.bytes.substr(0, options.prefix_bytes) : it->second.bytes;
    const std::string tag = it->second.etag;
    auto during = std::exchange(during_, nullptr);
    lock.unlock();
    const auto half = bytes.size() / 2;
    if (auto r = sink(0, bytes.data(), half); !r) return r.error();
    if (during) during();
    lock.lock();
    it = objects_.find(object.url.to_string());
    if (it == objects_.end() || it->second.etag != tag) {
      stats.changed = true;
      return stats;
    }
    lock.unlock();
    if (auto r = sink(half, bytes.data() + half, bytes.size() - half); !r) return r.error();
    stats.bytes = bytes.size();
    stats.requests = 2;
    return stats;
  }

 private:
  struct object {
    std::string bytes, etag;
  };
  static sources::object_info info(const std::string& url, const object& o) {
    sources::object_info out;
    out.url = *sources::parse_object_url(url);
    out.size = o.bytes.size();
    out.etag = o.etag;
    return out;
  }

  mutable std::mutex mutex_;
  std::condition_variable opened_;
  std::map<std::string, object> objects_;
  std::uint64_t tags_ = 0;
  bool gate_open_ = true;
  int failures_ = 0;
  error failure_;
  std::function<void()> during_;
  int fetches_ = 0, heads_ = 0;
};

}  // namespace warm::test
