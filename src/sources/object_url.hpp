// Where a model's bytes live when they are not on this machine's disk: an object in S3 (or an
// S3-compatible store) or a file on an HTTP(S) server. Pure parsing, no I/O.
#pragma once

#include <string>

#include "warm/error.hpp"

namespace warm::sources {

struct object_url {
  enum class scheme { s3, http, https };
  scheme kind = scheme::s3;
  // s3: the bucket and the key (or key prefix) inside it, without a leading '/'. Decoded: the
  // key's own bytes ("a b", not "a%20b"); the stores percent-encode it in requests.
  std::string bucket;
  std::string key;
  // http(s): host[:port] (lower-cased) and the path, starting with '/'; decoded as the key is.
  std::string authority;
  std::string path;

  // The URL as warm shows it in messages, logs and inspection: never a credential (URLs with
  // user information are refused by parse, so there is none to show). Control bytes, space, '%',
  // '?' and '#' of the key or path are percent-encoded, so parse_object_url(to_string()) gives
  // this URL back.
  std::string to_string() const;
  // This URL with `relative` ("mnist/3/model.safetensors", decoded) appended below it as a
  // directory.
  object_url child(const std::string& relative) const;
};

// Whether `location` names a remote object ("s3://", "http://", "https://"), as opposed to a local
// path. Case-insensitive scheme.
bool is_remote(const std::string& location);

// Parses "s3://BUCKET[/KEY]" or "http(s)://HOST[:PORT][/PATH]"; the scheme is case-insensitive,
// %XX escapes in KEY and PATH are decoded, trailing '/' are dropped. invalid_argument, naming what
// is wrong, for: another scheme, an empty or invalid bucket (S3's naming rules: 3-63 of a-z, 0-9,
// '.', '-', starting and ending with a letter or digit, no ".."), an invalid host or port, user
// information ("user:secret@host": credentials never travel in URLs; the message hides it), a NUL
// or control byte (raw or escaped), a space, a malformed escape, a query or fragment, an empty
// path segment or one that is "." or ".." after decoding (an object may not escape its prefix),
// over 4096 bytes.
expected<object_url> parse_object_url(const std::string& location);

}  // namespace warm::sources
