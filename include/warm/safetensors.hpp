// The safetensors container: a validated view of a model file's header.
//
// Layout: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON header, then the data buffer.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets
// relative to the buffer) and may hold "__metadata__": {string: string}.
//
// parse_safetensors_header() never trusts its input: it checks the header length against the file
// and a 100 MB cap, JSON well-formedness and nesting, known dtypes, that shape x dtype size equals
// the offset span (with overflow checks), that offsets are in bounds, contiguous, non-overlapping
// and cover the whole buffer, and that no name (or key) appears twice. It reads the JSON in one
// streaming pass, without a document tree, so what it allocates stays within a small multiple of
// the header's length (about 4x for the densest valid header; a shape of more than 64 dimensions
// and a __metadata__ of more than 4096 entries are refused), and it is safe to fuzz. Model-kind
// rules (e.g. "dense") live in dense_model.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"

namespace warm {

// Element types of the safetensors format.
enum class dtype {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  i64,
  i32,
  i16,
  i8,
  u64,
  u32,
  u16,
  u8,
  boolean
};

// "F32", "BF16", ... as written in files; parse_dtype() is its inverse.
std::string_view to_string(dtype type) noexcept;
std::optional<dtype> parse_dtype(std::string_view name) noexcept;
// Bytes per element.
std::size_t dtype_size(dtype type) noexcept;

// One tensor entry of the header. Offsets are relative to the start of the data buffer.
struct tensor_info {
  std::string name;
  warm::dtype dtype = dtype::f32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // first byte
  std::uint64_t end = 0;    // one past the last byte

  std::uint64_t bytes() const { return end - begin; }
  std::uint64_t elements() const;
};

// Upper bound on the JSON header, as in the reference implementation.
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

// A validated safetensors header. Tensors are sorted by their offset in the data buffer.
struct safetensors_header {
  std::uint64_t header_bytes = 0;  // N, the JSON length
  std::uint64_t data_offset = 0;   // 8 + N: where the buffer starts in the file
  std::uint64_t data_bytes = 0;    // the buffer's length: file size - data_offset
  std::vector<tensor_info> tensors;
  std::map<std::string, std::string> metadata;

  // The tensor with this name, or nullptr.
  const tensor_info* find(std::string_view name) const;
};

// Validates a header given its JSON text and the size of the whole file it came from.
// `json` must be exactly the N header bytes. Errors are invalid_argument with a message naming
// what is wrong (the caller prefixes the file name).
expected<safetensors_header> parse_safetensors_header(std::string_view json,
                                                      std::uint64_t file_size);

// Validates a complete in-memory file image (length prefix, header, buffer size).
expected<safetensors_header> parse_safetensors(std::string_view file_bytes);

// Opens and validates a file on disk, reading only its header (never the data). Errors name the
// file: not_found when it cannot be opened, invalid_argument when it is malformed.
expected<safetensors_header> read_safetensors_header(const std::string& path);

}  // namespace warm
