// Where a model's bytes live when they are not on this machine's disk: an object in S3 (or an
// S3-compatible store) or a file on an HTTP(S) server. Pure parsing, no I/O.
#pragma once

#include <string>

#include "warm/error.hpp"

namespace warm::sources {

struct object_url {
  enum class scheme { s3, http, https };
  scheme kind = scheme::s3;
  // s3: the bucket and the key (or key prefix) inside it, without a leading '/'.
  std::string bucket;
  std::string key;
  // http(s): host[:port] and the path, starting with '/'.
  std::string authority;
  std::string path;

  // The URL as warm shows it in messages, logs and inspection: never a credential (URLs with
  // user information are refused by parse, so there is none to show).
  std::string to_string() const;
  // This URL with `relative` ("mnist/3/model.safetensors") appended below it as a directory.
  object_url child(const std::string& relative) const;
};

// Whether `location` names a remote object ("s3://", "http://", "https://"), as opposed to a local
// path. Case-insensitive scheme.
bool is_remote(const std::string& location);

// Parses "s3://BUCKET[/KEY]" or "http(s)://HOST[:PORT][/PATH]". invalid_argument, naming what is
// wrong, for: another scheme, an empty or invalid bucket (S3's naming rules), user information
// ("user:secret@host": credentials never travel in URLs), a NUL or control byte, a query or
// fragment, a path segment "." or ".." (an object may not escape its prefix), over 4096 bytes.
expected<object_url> parse_object_url(const std::string& location);

}  // namespace warm::sources
