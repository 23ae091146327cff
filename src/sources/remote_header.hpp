// A remote safetensors file's header without its weights: what a registration needs to describe
// a model (its tensors, widths and size) for the price of one or two small ranged GETs, however
// large the model. Blocks on the network: offload and loader threads only.
#pragma once

#include <memory>

#include "sources/remote_repository.hpp"
#include "storage/file_arrival.hpp"

namespace warm::sources {

// The bytes a header fetch asks for first: most safetensors headers fit. An object no larger is
// as cheap to fetch whole.
inline constexpr std::uint64_t header_first_look = 64 << 10;

// The first bytes of `model` (a safetensors object as resolve described it: size and entity tag
// known): the 8-byte length and the JSON header, fetched with If-Match on the entity tag, held in
// memory (a memfd) as an arrival whose reads beyond them fail with "only its header was fetched".
// invalid_argument for an object too short or a header length past the object or the parser's
// limit (nothing more is fetched); the store's errors as fetch gives them. An object replaced
// since `model` described it is looked at again and its new header read (3 tries, then
// unavailable); `model` is updated to what was read.
expected<std::shared_ptr<file_arrival>> fetch_header(const remote_repository& repository,
                                                     remote_model& model);

}  // namespace warm::sources
