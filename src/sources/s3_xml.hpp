// The XML of S3's answers: a ListObjectsV2 page and an error document. Pure parsing (pugixml) of
// untrusted input: anything malformed is an error, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::sources {

struct listed_object {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;  // quotes removed
};

struct list_page {
  std::vector<listed_object> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken when truncated
};

// invalid_argument naming what is wrong for a document that is not a ListBucketResult.
expected<list_page> parse_list_page(const std::string& xml);

// "Code: Message" of an S3 <Error> document, or "" when `xml` is not one (shortened to 200 bytes;
// an error document never carries a credential, but a body may be anything: control bytes are
// dropped).
std::string describe_s3_error(const std::string& xml);

}  // namespace warm::sources
