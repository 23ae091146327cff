// Reading a safetensors header's JSON in one streaming pass, without a document tree.
//
// A tree of the JSON costs up to ~25 bytes per byte of text (a crafted 99 MB header took 2.5 GB);
// this reader keeps only what the header describes: one tensor_info per tensor (a tensor entry
// takes at least ~45 bytes of text, its record ~100 bytes) and the metadata strings. Every limit
// below is what keeps memory within a small multiple of the text:
//  - containers nest at most 2 deep below the root (root > tensor > shape), as the format needs;
//  - a shape has at most `max_header_rank` dimensions;
//  - `__metadata__` holds at most `max_metadata_entries` entries (each a map node).
//
// The checks and messages are those of parse_safetensors_header (warm/safetensors.hpp): nesting,
// duplicate keys, the root not an object, every per-tensor rule. The layout (offsets tiling the
// buffer) is the caller's. Pure code, safe on any input; never throws.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/safetensors.hpp"

namespace warm::detail {

// Most dimensions a tensor's shape may have (PyTorch allows 64 at most).
inline constexpr std::size_t max_header_rank = 64;
// Most entries `__metadata__` may hold (warm reads two; real files hold a handful).
inline constexpr std::size_t max_metadata_entries = 4096;

// What a header's JSON holds: tensors in the order of the text, and the metadata.
struct header_contents {
  std::vector<tensor_info> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads `text`, the header's JSON, checking everything but the layout. invalid_argument naming
// the problem (never quoting the text beyond a key or dtype name).
expected<header_contents> read_header_json(std::string_view text);

}  // namespace warm::detail
