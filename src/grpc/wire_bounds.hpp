// What a protobuf message will cost once parsed, bounded before it is parsed.
//
// protobuf's parser allocates one object per sub-message and per string it meets, and nothing
// bounds how many a message holds: 2 bytes on the wire (`inputs {}`) become a message object of a
// hundred bytes and more, so a 64 MiB request can cost gigabytes to parse. check_wire walks the
// encoded message once, guided by its descriptor, without allocating anything per field, and
// refuses it before the parser runs when it would hold too many entries or cost too much memory.
#pragma once

#include <cstdint>

#include "warm/error.hpp"

namespace google::protobuf {
class Descriptor;
namespace io {
class ZeroCopyInputStream;
}
}  // namespace google::protobuf

namespace warm::grpc_front {

struct wire_limits {
  // Entries of one repeated message, string or map field within one message (a request's
  // inputs, outputs, parameters, raw contents). Packed scalars are not entries: they are bounded
  // by parsed_bytes.
  std::uint32_t max_repeated = 1024;
  // Sub-messages, strings and unknown fields in the whole message.
  std::uint64_t max_objects = 65536;
  // The memory parsing is estimated to take: 128 bytes per sub-message, 32 per string or
  // unknown field plus its bytes, each repeated scalar's element size (packed varints are
  // counted). 0: eight times the wire size (an INT64 list of one-byte varints takes 8x), and at
  // least 16 MiB (small messages of many small entries cost more than 8x, and little in all).
  std::uint64_t max_parsed_bytes = 0;
  // Sub-messages nested in sub-messages.
  int max_depth = 16;
};

// Checks the message of type `type` encoded in `in` (read to its end) against `limits`.
// invalid_argument naming the field ("field 'inputs' has more than 1024 entries") when it is over
// a limit, and when the bytes are not a well-formed encoding of `type` (wire types that disagree
// with the descriptor, truncated fields, groups); the parser would refuse the latter anyway.
// Reads the stream once; allocates nothing in proportion to the message.
expected<void> check_wire(google::protobuf::io::ZeroCopyInputStream& in, std::uint64_t wire_bytes,
                          const google::protobuf::Descriptor& type, const wire_limits& limits);

}  // namespace warm::grpc_front
