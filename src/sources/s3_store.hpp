// The S3 API over libcurl: ListObjectsV2, HEAD and ranged GETs, signed with AWS Signature V4
// (libcurl's CURLOPT_AWS_SIGV4, with x-amz-content-sha256 set as S3 requires). Path-style
// addressing (ENDPOINT/BUCKET/KEY) against an endpoint (MinIO, Ceph, R2, a local test server), or
// virtual-hosted style against AWS itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sources/aws_credentials.hpp"
#include "sources/object_store.hpp"

namespace warm::sources {

struct s3_options {
  // "http(s)://HOST[:PORT]" of an S3-compatible store; empty: AWS
  // (https://BUCKET.s3.REGION.amazonaws.com).
  std::string endpoint;
  std::string region = "us-east-1";
  // Without credentials requests are sent unsigned (public buckets).
  std::optional<aws_credentials> credentials;
  // Path-style addressing (always with an endpoint).
  bool path_style = true;
  // Extra CA bundle for an https endpoint (empty: the system's).
  std::string ca_file;
  // Keys per ListObjectsV2 page (max-keys); 0: the store's own default (1000 on S3). Tests set it
  // low to exercise paging.
  std::uint32_t list_page_keys = 0;
};

// invalid_argument for a malformed endpoint.
expected<std::unique_ptr<object_store>> make_s3_store(s3_options options);

}  // namespace warm::sources
