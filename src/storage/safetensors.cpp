#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "storage/file.hpp"
#include "storage/header_reader.hpp"
#include "storage/safetensors_file.hpp"
#include "warm/safetensors.hpp"

namespace warm {
namespace {

struct dtype_entry {
  dtype type;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<dtype_entry, 15> dtype_table{{
    {dtype::f64, "F64", 8},
    {dtype::f32, "F32", 4},
    {dtype::f16, "F16", 2},
    {dtype::bf16, "BF16", 2},
    {dtype::f8_e4m3, "F8_E4M3", 1},
    {dtype::f8_e5m2, "F8_E5M2", 1},
    {dtype::i64, "I64", 8},
    {dtype::i32, "I32", 4},
    {dtype::i16, "I16", 2},
    {dtype::i8, "I8", 1},
    {dtype::u64, "U64", 8},
    {dtype::u32, "U32", 4},
    {dtype::u16, "U16", 2},
    {dtype::u8, "U8", 1},
    {dtype::boolean, "BOOL", 1},
}};

std::string in_quotes(std::string_view name) {
  return "'" + std::string(name) + "'";
}

// Offsets must tile [0, data_bytes) exactly: in bounds, no overlap, no gap, nothing left over.
expected<void> check_layout(std::vector<tensor_info>& tensors, std::uint64_t data_bytes) {
  for (const auto& t : tensors)
    if (t.end > data_bytes)
      return invalid_input("tensor " + in_quotes(t.name) + ": data_offsets end at " +
                           std::to_string(t.end) + ", past the " + std::to_string(data_bytes) +
                           "-byte data buffer");
  std::sort(tensors.begin(), tensors.end(), [](const tensor_info& a, const tensor_info& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t cursor = 0;
  const tensor_info* previous = nullptr;
  for (const auto& t : tensors) {
    if (t.begin < cursor)
      return invalid_input("tensor " + in_quotes(t.name) + " overlaps tensor " +
                           in_quotes(previous->name));
    if (t.begin > cursor)
      return invalid_input("gap of " + std::to_string(t.begin - cursor) + " bytes before tensor " +
                           in_quotes(t.name) + " (data must be contiguous)");
    cursor = t.end;
    previous = &t;
  }
  if (cursor != data_bytes)
    return invalid_input("data buffer has " + std::to_string(data_bytes - cursor) +
                         " trailing bytes not covered by any tensor");
  return {};
}

}  // namespace

std::string_view to_string(dtype type) noexcept {
  for (const auto& e : dtype_table)
    if (e.type == type) return e.name;
  return "?";
}

std::optional<dtype> parse_dtype(std::string_view name) noexcept {
  for (const auto& e : dtype_table)
    if (e.name == name) return e.type;
  return std::nullopt;
}

std::size_t dtype_size(dtype type) noexcept {
  for (const auto& e : dtype_table)
    if (e.type == type) return e.size;
  return 1;
}

std::uint64_t tensor_info::elements() const {
  std::uint64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

const tensor_info* safetensors_header::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

expected<safetensors_header> parse_safetensors_header(std::string_view text,
                                                      std::uint64_t file_size) {
  safetensors_header header;
  header.header_bytes = text.size();
  if (header.header_bytes > max_header_bytes)
    return invalid_input("header of " + std::to_string(header.header_bytes) +
                         " bytes exceeds the " + std::to_string(max_header_bytes) + "-byte limit");
  header.data_offset = 8 + header.header_bytes;
  if (header.data_offset > file_size)
    return invalid_input("header length " + std::to_string(header.header_bytes) +
                         " runs past the end of the " + std::to_string(file_size) + "-byte file");
  header.data_bytes = file_size - header.data_offset;

  auto contents = detail::read_header_json(text);  // streamed: no document tree
  if (!contents) return std::move(contents).error();
  header.tensors = std::move(contents->tensors);
  header.metadata = std::move(contents->metadata);
  if (auto layout = check_layout(header.tensors, header.data_bytes); !layout)
    return std::move(layout).error();
  return header;
}

namespace {

// Reads the 8-byte little-endian length prefix.
std::uint64_t load_le64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

// The prefix is the file's first eight bytes: errors never show its value, since a file that is
// not a model (a path swapped for another file) would have its first bytes echoed to a client.
expected<std::uint64_t> check_prefix(const unsigned char* prefix, std::uint64_t file_size) {
  std::uint64_t n = load_le64(prefix);
  if (n > max_header_bytes)
    return invalid_input("header length prefix exceeds the " + std::to_string(max_header_bytes) +
                         "-byte limit (is this a safetensors file?)");
  if (n > file_size - 8)
    return invalid_input("header length prefix runs past the end of the " +
                         std::to_string(file_size) + "-byte file (is this a safetensors file?)");
  return n;
}

}  // namespace

expected<safetensors_header> parse_safetensors(std::string_view bytes) {
  if (bytes.size() < 8)
    return invalid_input("file of " + std::to_string(bytes.size()) +
                         " bytes is too short for the 8-byte header length");
  auto n = check_prefix(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  if (!n) return std::move(n).error();
  return parse_safetensors_header(bytes.substr(8, *n), bytes.size());
}

expected<safetensors_header> read_safetensors_header(const read_file& file) {
  auto prefixed = [&](error e) {
    e.message = file.path() + ": " + e.message;
    return e;
  };
  if (file.size() < 8)
    return prefixed(invalid_input("file of " + std::to_string(file.size()) +
                                  " bytes is too short for the 8-byte header length"));
  unsigned char prefix[8];
  if (auto r = file.read_exactly(prefix, 8, 0); !r) return std::move(r).error();
  auto n = check_prefix(prefix, file.size());
  if (!n) return prefixed(std::move(n).error());
  std::string text(*n, '\0');
  if (auto r = file.read_exactly(text.data(), text.size(), 8); !r) return std::move(r).error();
  auto header = parse_safetensors_header(text, file.size());
  if (!header) return prefixed(std::move(header).error());
  return header;
}

expected<safetensors_header> read_safetensors_header(const std::string& path) {
  auto file = read_file::open(path);
  if (!file) return std::move(file).error();
  return read_safetensors_header(*file);
}

}  // namespace warm
