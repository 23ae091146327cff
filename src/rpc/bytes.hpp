// Cap'n Proto Data and std::string, both ways (login nonces and proofs: rpc/authenticator.cpp,
// warmd's peer links).
#pragma once

#include <capnp/blob.h>

#include <string>

namespace warm::rpc {

inline std::string to_bytes(capnp::Data::Reader data) {
  return std::string(reinterpret_cast<const char*>(data.begin()), data.size());
}

// A view of `bytes`, valid while it lives.
inline capnp::Data::Reader as_data(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

}  // namespace warm::rpc
