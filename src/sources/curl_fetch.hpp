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

// How every request to one store is made.
struct request_auth {
  std::string sigv4;    // CURLOPT_AWS_SIGV4's provider ("aws:amz:REGION:s3"); empty: unsigned
  std::string userpwd;  // "ACCESS:SECRET" when signed; never shown
  std::vector<std::string> headers;  // sent with every request (x-amz-content-sha256, tokens)
  std::string ca_file;               // extra CA bundle; empty: the system's
};

struct http_answer {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last of repeated ones
  std::string body;                            // at most 32 MiB kept
};

// One request (`method` GET or HEAD) of `url` (already encoded), retried on a connection failure
// or a 5xx up to `options.attempts` times. `shown` names it in messages. An answer with any
// status is a value; only a request that got no answer is an error (unavailable).
expected<http_answer> request(const std::string& method, const std::string& url,
                              const std::string& shown, const request_auth& auth,
                              const fetch_options& options);

// The error an answer's status means (nothing for 2xx): not_found for 404, load_failed "access
// denied" for 401/403 and other 4xx, unavailable for 5xx; naming `shown` and S3's error code.
std::optional<error> status_error(const http_answer& answer, const std::string& shown);

// The entity tag of an answer's ETag header, quotes removed ("" when none).
std::string etag_of(const http_answer& answer);

// Fetches `object` at `url` (encoded; `shown` in messages) into `sink` with ranged GETs, as
// object_store::fetch says.
expected<fetch_stats> ranged_fetch(const std::string& url, const std::string& shown,
                                   const object_info& object, const request_auth& auth,
                                   const fetch_sink& sink, const fetch_options& options);

// RFC 3986 percent-encoding of every byte but unreserved ones and '/' (S3's canonical URI).
std::string encode_path(const std::string& path);

}  // namespace warm::sources
