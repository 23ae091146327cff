#include "grpc/wire_bounds.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <string>
#include <vector>

namespace warm::grpc_front {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

constexpr std::uint64_t message_cost = 128;  // a generated message object, roughly
constexpr std::uint64_t string_cost = 32;    // a std::string, before its bytes

// Bytes one element of a repeated scalar field takes in memory.
std::uint64_t element_size(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return 1;
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return 8;
    default:
      return 4;
  }
}

// The wire width of a fixed-width scalar (4 or 8), or 0 for a varint.
int fixed_width(const FieldDescriptor& field) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
    case FieldDescriptor::TYPE_FLOAT:
      return 4;
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

struct walk {
  const wire_limits& limits;
  std::uint64_t max_bytes;
  std::uint64_t wire_bytes;  // the whole message's size: no field may claim more than is left
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;

  expected<void> bad(const std::string& what) const {
    return make_error(errc::invalid_argument, "the request message " + what);
  }

  // Whether `length` bytes are left in the message after the stream's position.
  bool left(const CodedInputStream& in, std::uint32_t length) const {
    const auto at = static_cast<std::uint64_t>(in.CurrentPosition());
    return at <= wire_bytes && length <= wire_bytes - at;
  }

  // Adds what one field occurrence costs; an error once a limit is passed.
  expected<void> charge(std::uint64_t new_objects, std::uint64_t new_bytes,
                        const FieldDescriptor* field) {
    objects += new_objects;
    bytes += new_bytes;
    if (objects > limits.max_objects)
      return bad("holds more than " + std::to_string(limits.max_objects) + " entries in all");
    if (bytes > max_bytes)
      return bad("would take more than " + std::to_string(max_bytes) + " bytes to decode" +
                 (field ? " (field '" + field->name() + "')" : std::string()));
    return {};
  }

  // Walks one message of `type` up to the stream's current limit.
  expected<void> message(CodedInputStream& in, const Descriptor& type, int depth) {
    // Entries seen per field of this message, by field index (repeated fields only).
    std::vector<std::uint32_t> entries(static_cast<std::size_t>(type.field_count()), 0);
    for (;;) {
      const std::uint32_t tag = in.ReadTag();
      if (tag == 0) {
        if (!in.ConsumedEntireMessage()) return bad("is not a well-formed " + type.name());
        return {};
      }
      const auto wire = WireFormatLite::GetTagWireType(tag);
      const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
      if (wire == WireFormatLite::WIRETYPE_START_GROUP ||
          wire == WireFormatLite::WIRETYPE_END_GROUP)
        return bad("holds a group, which " + type.name() + " does not have");
      if (field == nullptr) {  // kept by the parser as an unknown field
        std::uint64_t length = 0;
        if (wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          std::uint32_t n = 0;
          if (!in.ReadVarint32(&n) || !left(in, n) || !in.Skip(static_cast<int>(n)))
            return bad("is truncated");
          length = n;
        } else if (!WireFormatLite::SkipField(&in, tag)) {
          return bad("is truncated");
        }
        if (auto r = charge(1, string_cost + length, nullptr); !r) return r;
        continue;
      }
      if (field->is_repeated()) {
        auto& seen = entries[static_cast<std::size_t>(field->index())];
        const bool counted = field->type() == FieldDescriptor::TYPE_MESSAGE ||
                             field->type() == FieldDescriptor::TYPE_STRING ||
                             field->type() == FieldDescriptor::TYPE_BYTES;
        if (counted && ++seen > limits.max_repeated)
          return bad("field '" + field->name() + "' has more than " +
                     std::to_string(limits.max_repeated) + " entries");
      }
      if (auto r = occurrence(in, *field, wire, depth); !r) return r;
    }
  }

  expected<void> occurrence(CodedInputStream& in, const FieldDescriptor& field,
                            WireFormatLite::WireType wire, int depth) {
    const auto type = field.type();
    const bool delimited = wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (type == FieldDescriptor::TYPE_MESSAGE || type == FieldDescriptor::TYPE_STRING ||
        type == FieldDescriptor::TYPE_BYTES) {
      if (!delimited) return bad("field '" + field.name() + "' has the wrong wire type");
      std::uint32_t length = 0;
      if (!in.ReadVarint32(&length) || !left(in, length)) return bad("is truncated");
      if (type != FieldDescriptor::TYPE_MESSAGE) {
        if (auto r = charge(1, string_cost + length, &field); !r) return r;
        if (!in.Skip(static_cast<int>(length))) return bad("is truncated");
        return {};
      }
      if (depth >= limits.max_depth)
        return bad("nests messages deeper than " + std::to_string(limits.max_depth));
      if (auto r = charge(1, message_cost, &field); !r) return r;
      const auto limit = in.PushLimit(static_cast<int>(length));
      if (auto r = message(in, *field.message_type(), depth + 1); !r) return r;
      in.PopLimit(limit);
      return {};
    }
    if (delimited) {  // a packed run of scalars
      if (!field.is_repeated()) return bad("field '" + field.name() + "' has the wrong wire type");
      std::uint32_t length = 0;
      if (!in.ReadVarint32(&length) || !left(in, length)) return bad("is truncated");
      const std::uint64_t size = element_size(field);
      std::uint64_t count = 0;
      if (const int fixed = fixed_width(field)) {
        count = length / static_cast<std::uint32_t>(fixed);
        if (!in.Skip(static_cast<int>(length))) return bad("is truncated");
      } else {  // varints: counted one by one (cheap; nothing is stored)
        const auto limit = in.PushLimit(static_cast<int>(length));
        std::uint64_t value = 0;
        while (in.BytesUntilLimit() > 0) {
          if (!in.ReadVarint64(&value)) return bad("is truncated");
          ++count;
        }
        in.PopLimit(limit);
      }
      return charge(0, count * size, &field);
    }
    if (!WireFormatLite::SkipField(&in, WireFormatLite::MakeTag(field.number(), wire)))
      return bad("is truncated");
    return field.is_repeated() ? charge(0, element_size(field), &field) : expected<void>{};
  }
};

}  // namespace

expected<void> check_wire(google::protobuf::io::ZeroCopyInputStream& stream,
                          std::uint64_t wire_bytes, const Descriptor& type,
                          const wire_limits& limits) {
  walk w{limits,
         limits.max_parsed_bytes ? limits.max_parsed_bytes
                                 : std::max<std::uint64_t>(8 * wire_bytes, 16 << 20),
         wire_bytes};
  CodedInputStream in(&stream);
  in.SetTotalBytesLimit(INT32_MAX);
  return w.message(in, type, 0);
}

}  // namespace warm::grpc_front
