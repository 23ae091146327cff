// Fuzz target: the safetensors header reader (warm/safetensors.hpp) and the dense-model rules
// (warm/dense_model.hpp) on whatever parses. The input is a whole file image: 8-byte length
// prefix, JSON header, data buffer. Beyond "no crash, leak or sanitizer report", every accepted
// header and dense spec must satisfy what the headers promise (FUZZ_CHECK).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "warm/dense_model.hpp"
#include "warm/safetensors.hpp"

namespace {

void check_header(const warm::safetensors_header& h, std::uint64_t file_size) {
  FUZZ_CHECK(h.header_bytes <= warm::max_header_bytes);
  FUZZ_CHECK(h.data_offset == 8 + h.header_bytes);
  FUZZ_CHECK(h.data_offset <= file_size);
  FUZZ_CHECK(h.data_bytes == file_size - h.data_offset);
  std::set<std::string> names;
  std::uint64_t cursor = 0;
  for (const auto& t : h.tensors) {
    FUZZ_CHECK(names.insert(t.name).second);  // no name twice
    FUZZ_CHECK(t.begin == cursor);            // sorted, contiguous, no overlap
    FUZZ_CHECK(t.end >= t.begin);
    std::uint64_t bytes = warm::dtype_size(t.dtype);
    for (auto d : t.shape)
      FUZZ_CHECK(!__builtin_mul_overflow(bytes, d, &bytes));
    FUZZ_CHECK(bytes == t.bytes());
    FUZZ_CHECK(warm::parse_dtype(warm::to_string(t.dtype)) == t.dtype);
    FUZZ_CHECK(h.find(t.name) == &t);
    cursor = t.end;
  }
  FUZZ_CHECK(cursor == h.data_bytes);  // the tensors cover the buffer exactly
}

void check_dense(const warm::dense_spec& spec, const warm::safetensors_header& h) {
  FUZZ_CHECK(!spec.layers.empty());
  FUZZ_CHECK(spec.data_bytes == h.data_bytes);
  FUZZ_CHECK(2 * spec.layers.size() == h.tensors.size());
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const auto& l = spec.layers[i];
    FUZZ_CHECK(l.in >= 1 && l.in <= warm::max_dense_width);
    FUZZ_CHECK(l.out >= 1 && l.out <= warm::max_dense_width);
    if (i > 0) FUZZ_CHECK(spec.layers[i - 1].out == l.in);
    FUZZ_CHECK(l.weight_offset % 4 == 0 && l.bias_offset % 4 == 0);
    FUZZ_CHECK(l.weight_offset <= spec.data_bytes &&
               l.in * l.out * 4 <= spec.data_bytes - l.weight_offset);
    FUZZ_CHECK(l.bias_offset <= spec.data_bytes && l.out * 4 <= spec.data_bytes - l.bias_offset);
  }
  FUZZ_CHECK(spec.widest() >= spec.input_width() && spec.widest() >= spec.output_width());
  FUZZ_CHECK(spec.parameters() * 4 == spec.data_bytes);  // every byte is a weight or a bias
  FUZZ_CHECK(warm::parse_activation(warm::to_string(spec.activation)) == spec.activation);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = warm::parse_safetensors(bytes);
  if (header) {
    check_header(*header, size);
    auto spec = warm::dense_spec_from(*header);
    if (spec) check_dense(*spec, *header);
  } else {
    FUZZ_CHECK(header.error().code == warm::errc::invalid_argument);
    FUZZ_CHECK(!header.error().message.empty());
  }

  // The JSON alone against extreme file sizes: the size arithmetic must hold at both ends.
  if (size >= 8) {
    auto json = bytes.substr(8);
    FUZZ_CHECK(!warm::parse_safetensors_header(json, 7));  // shorter than its own prefix
    auto huge = warm::parse_safetensors_header(json, std::numeric_limits<std::uint64_t>::max());
    if (huge) check_header(*huge, std::numeric_limits<std::uint64_t>::max());
  }
  return 0;
}
