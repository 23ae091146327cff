#include "grpc/input_decode.hpp"

#include <cstring>
#include <limits>
#include <string>

#include "v2/v2_common.hpp"

namespace warm::grpc_front {

namespace {

// Copies typed contents into `t.data` as `t.type`'s elements (each must fit the type).
template <class To, class List>
expected<void> put_contents(const List& list, tensor& t, const char* field) {
  t.data.resize(static_cast<std::size_t>(list.size()) * sizeof(To));
  for (int i = 0; i < list.size(); ++i) {
    auto v = list.Get(i);
    To x = static_cast<To>(v);
    if (static_cast<decltype(v)>(x) != v)
      return make_error(errc::invalid_argument, "input '" + t.name + "': " + field + "[" +
                                                    std::to_string(i) + "] is out of " +
                                                    std::string(v2_name(t.type)) + " range");
    std::memcpy(t.data.data() + static_cast<std::size_t>(i) * sizeof(To), &x, sizeof(To));
  }
  return {};
}

}  // namespace

expected<tensor> decode_input(const ::inference::ModelInferRequest::InferInputTensor& in,
                              const std::string* raw, std::uint64_t max_bytes) {
  auto bad = [&](const std::string& what) {
    return make_error(errc::invalid_argument, "input '" + in.name() + "': " + what);
  };
  auto type = parse_v2_dtype(in.datatype());
  if (!type) return bad("datatype \"" + in.datatype() + "\" is not supported");
  if (in.shape_size() > 32) return bad("shape has more than 32 dimensions");
  tensor t;
  t.name = in.name();
  t.type = *type;
  const std::uint64_t element = dtype_size(t.type);
  std::uint64_t count = 1;
  for (auto d : in.shape()) {
    if (d < 0) return bad("shape must hold non-negative integers, not " + std::to_string(d));
    auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && count > max_bytes / element / dim)
      return bad("shape exceeds the tensor limit of " + std::to_string(max_bytes) + " bytes");
    count *= dim;
    t.shape.push_back(dim);
  }
  const auto& c = in.contents();
  const std::uint64_t lists = (c.fp32_contents_size() > 0) + (c.fp64_contents_size() > 0) +
                              (c.int_contents_size() > 0) + (c.int64_contents_size() > 0) +
                              (c.uint_contents_size() > 0) + (c.uint64_contents_size() > 0) +
                              (c.bool_contents_size() > 0) + (c.bytes_contents_size() > 0);
  if (raw) {
    if (lists) return bad("data is in both contents and raw_input_contents");
    if (raw->size() != count * element)
      return bad("raw_input_contents holds " + std::to_string(raw->size()) +
                 " bytes; the shape needs " + std::to_string(count * element));
    t.data.resize(raw->size());
    if (!raw->empty()) std::memcpy(t.data.data(), raw->data(), raw->size());
    return t;
  }
  // The list a datatype's data goes in, and how many elements it holds.
  const char* field = nullptr;
  std::uint64_t given = 0;
  switch (t.type) {
    case dtype::f32:
      field = "fp32_contents", given = static_cast<std::uint64_t>(c.fp32_contents_size());
      break;
    case dtype::f64:
      field = "fp64_contents", given = static_cast<std::uint64_t>(c.fp64_contents_size());
      break;
    case dtype::i64:
      field = "int64_contents", given = static_cast<std::uint64_t>(c.int64_contents_size());
      break;
    case dtype::i32:
    case dtype::i16:
    case dtype::i8:
      field = "int_contents", given = static_cast<std::uint64_t>(c.int_contents_size());
      break;
    case dtype::u64:
      field = "uint64_contents", given = static_cast<std::uint64_t>(c.uint64_contents_size());
      break;
    case dtype::u32:
    case dtype::u16:
    case dtype::u8:
      field = "uint_contents", given = static_cast<std::uint64_t>(c.uint_contents_size());
      break;
    case dtype::boolean:
      field = "bool_contents", given = static_cast<std::uint64_t>(c.bool_contents_size());
      break;
    default:
      return bad(in.datatype() + " data goes in raw_input_contents");
  }
  if (lists > (given > 0 ? 1u : 0u))
    return bad(in.datatype() + " data goes in " + field +
               " (or raw_input_contents), not another list");
  if (given != count)
    return bad(std::string(field) + " holds " + std::to_string(given) +
               " elements; the shape needs " + std::to_string(count));
  expected<void> put;
  switch (t.type) {
    case dtype::f32:
      put = put_contents<float>(c.fp32_contents(), t, field);
      break;
    case dtype::f64:
      put = put_contents<double>(c.fp64_contents(), t, field);
      break;
    case dtype::i64:
      put = put_contents<std::int64_t>(c.int64_contents(), t, field);
      break;
    case dtype::i32:
      put = put_contents<std::int32_t>(c.int_contents(), t, field);
      break;
    case dtype::i16:
      put = put_contents<std::int16_t>(c.int_contents(), t, field);
      break;
    case dtype::i8:
      put = put_contents<std::int8_t>(c.int_contents(), t, field);
      break;
    case dtype::u64:
      put = put_contents<std::uint64_t>(c.uint64_contents(), t, field);
      break;
    case dtype::u32:
      put = put_contents<std::uint32_t>(c.uint_contents(), t, field);
      break;
    case dtype::u16:
      put = put_contents<std::uint16_t>(c.uint_contents(), t, field);
      break;
    case dtype::u8:
      put = put_contents<std::uint8_t>(c.uint_contents(), t, field);
      break;
    case dtype::boolean:
      put = put_contents<std::uint8_t>(c.bool_contents(), t, field);
      break;
    default:
      break;
  }
  if (!put) return std::move(put).error();
  return t;
}

}  // namespace warm::grpc_front
