// What the S3 and HTTP stores share over libcurl: how requests are signed, one request with its
// status, headers and body, the errors a status means, and the concurrent ranged fetch (one curl
// multi handle on the calling thread, `streams` ranges in flight). Internal to src/sources.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sources/object_store.hpp"

namespace warm::sources {

// How every request to one store is made. The key and secret are handed to libcurl only
// (CURLOPT_USERNAME/PASSWORD, which CURLOPT_AWS_SIGV4 signs with); no message ever shows them.
struct request_auth {
  std::string sigv4;       // CURLOPT_AWS_SIGV4's provider ("aws:amz:REGION:s3"); empty: unsigned
  std::string access_key;  // when signed
  std::string secret_key;  // when signed
  std::vector<std::string> headers;  // sent with every request (x-amz-content-sha256, tokens)
  std::string ca_file;               // extra CA bundle; empty: the system's
};

struct http_answer {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last of repeated ones
  std::string body;                            // at most 32 MiB kept
};

// One request (`method` GET or HEAD) of `url` (already encoded), retried on a connection failure
// or a 5xx up to `options.attempts` times (retry_delay, doubling). A fresh handle per request;
// stalled means under 1 byte/s over stall_timeout (whole seconds, at least 1: libcurl's
// low-speed limit). `shown` names it in messages. An answer with any
// status is a value; only a request that got no answer is an error (unavailable).
expected<http_answer> request(const std::string& method, const std::string& url,
                              const std::string& shown, const request_auth& auth,
                              const fetch_options& options);

// The error an answer's status means (nothing for 2xx): not_found for 404, load_failed "access
// denied" for 401/403 and other 4xx, unavailable for 5xx; naming `shown` and S3's error code.
std::optional<error> status_error(const http_answer& answer, const std::string& shown);

// The entity tag of an answer's ETag header, quotes removed ("" when none).
std::string etag_of(const http_answer& answer);

// The object a successful HEAD answer describes: `url`, its size from Content-Length and its
// entity tag. load_failed, naming `url`, when Content-Length is missing or not a number.
expected<object_info> described_by(const object_url& url, const http_answer& answer);

// Fetches `object` at `url` (encoded; `shown` in messages) into `sink` with ranged GETs, as
// object_store::fetch says. Exactly:
//  1. The object is cut into parts of options.part_bytes; up to options.streams of them are in
//     flight at once on one curl multi handle driven by the calling thread, each stream keeping
//     its easy handle (and so its connection) from part to part. Each GET carries
//     "Range: bytes=A-B" and, when the object has an entity tag, If-Match on it.
//  2. An answer is accepted when it is 206 with "Content-Range: bytes A-B/SIZE" (SIZE the
//     object's or '*') or 200 for a whole object asked for whole, its ETag (when sent) is the
//     object's, and exactly B-A+1 bytes arrive. More bytes than asked: load_failed. Another
//     range: load_failed. A 200 to a part: load_failed ("ignored a range request").
//  3. 412, 416 (the object is now shorter than a range asked for), another ETag or another SIZE:
//     the object changed. The fetch stops at once and
//     returns stats with changed = true (not an error); the sink holds bytes of two versions.
//  4. Tried again, from the first byte not yet received, after retry_delay doubled per try: a
//     5xx, a body cut short, a reset or refused connection, a timeout, and a range that receives
//     nothing for options.stall_timeout. After options.attempts tries of one range: the last
//     error (unavailable for 5xx and network failures), with "(N tries)".
//  5. Other statuses stop the fetch: 404 not_found, 401/403 load_failed "access denied", 3xx
//     load_failed (redirects are never followed), other 4xx load_failed; each naming `shown`,
//     the status and S3's error code and message when the body has them.
//  6. A sink error stops the fetch with that error. stats.bytes counts the bytes given to the
//     sink, requests every GET sent, retries every range tried again.
expected<fetch_stats> ranged_fetch(const std::string& url, const std::string& shown,
                                   const object_info& object, const request_auth& auth,
                                   const fetch_sink& sink, const fetch_options& options);

// RFC 3986 percent-encoding of every byte but unreserved ones, and '/' too when `keep_slash`.
std::string percent_encode(const std::string& text, bool keep_slash);
// A path as S3's canonical URI wants it: percent_encode keeping '/'.
std::string encode_path(const std::string& path);

}  // namespace warm::sources
