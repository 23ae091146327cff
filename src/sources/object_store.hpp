// Reading objects from a remote store: listing a prefix, looking at one object, and fetching its
// bytes with several concurrent ranged GETs. S3 (s3_store.hpp) and plain HTTP(S)
// (http_store.hpp) implement it over libcurl. Every call blocks on the network: call it from a
// thread that may block (a loader worker, an offload), never from an actor on a scheduler thread.
// Implementations are thread-safe: calls from several threads run independently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sources/object_url.hpp"
#include "warm/error.hpp"

namespace warm::sources {

// One object as the store described it.
struct object_info {
  object_url url;
  std::uint64_t size = 0;
  std::string etag;  // the store's entity tag, quotes removed; empty when the store gave none
};

// How a fetch runs.
struct fetch_options {
  std::size_t streams = 8;                     // ranged GETs in flight at once
  std::uint64_t part_bytes = 8ull << 20;       // bytes per ranged GET (the last one may be shorter)
  std::uint32_t attempts = 3;                  // tries per range on a transient error (5xx, reset)
  std::chrono::milliseconds retry_delay{200};  // before the second try; doubles after each
  std::chrono::milliseconds connect_timeout{5000};
  // A range that receives nothing for this long is abandoned (and tried again).
  std::chrono::milliseconds stall_timeout{30000};
  // Only the object's first bytes (its header): 0 fetches all of it.
  std::uint64_t prefix_bytes = 0;
};

// The most objects a listing may hold: a listing is untrusted input, and one prefix may not make
// warm hold an unbounded list.
inline constexpr std::size_t max_list_objects = 100'000;

// Receives a fetch's bytes: `bytes` at `offset` of the object. Called on the fetching thread,
// ranges in any order, never overlapping, each byte once; an error stops the fetch with it.
using fetch_sink =
    std::function<expected<void>(std::uint64_t offset, const char* data, std::size_t bytes)>;

// What a fetch did.
struct fetch_stats {
  std::uint64_t bytes = 0;     // received and given to the sink
  std::uint32_t requests = 0;  // ranged GETs, retries included
  std::uint32_t retries = 0;   // ranges tried again
  double seconds = 0;
  // The object was replaced during the fetch (an answer's entity tag, or a 412 to If-Match): the
  // bytes given to the sink are of two versions and must be thrown away. The fetch stops at once.
  bool changed = false;
};

class object_store {
 public:
  virtual ~object_store() = default;

  // Every object whose key starts with `prefix` (an S3 listing, all pages), sorted by key.
  // invalid_argument for stores that cannot list (plain HTTP: "name the model file"), and for a
  // prefix holding more than max_list_objects objects (the listing stops there: never held).
  virtual expected<std::vector<object_info>> list(const object_url& prefix) = 0;

  // The object's size and entity tag. not_found for a 404, load_failed for a 401/403 ("access
  // denied") and other 4xx, unavailable for 5xx or a connection failure (after the retries), each
  // naming the URL (never a credential) and the store's status and error code.
  virtual expected<object_info> head(const object_url& url) = 0;

  // Fetches all of `object` (as head described it) into `sink`. Every range is asked for with
  // If-Match on the entity tag, and each answer's entity tag and Content-Range are checked: an
  // object replaced during the fetch stops it with stats.changed (the caller looks again and
  // starts over, so bytes of two versions are never used together). A truncated body or a
  // transient error is retried per range (options.attempts); errors as head's.
  virtual expected<fetch_stats> fetch(const object_info& object, const fetch_sink& sink,
                                      const fetch_options& options) = 0;
};

}  // namespace warm::sources
