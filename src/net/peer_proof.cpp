#include "net/peer_proof.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <climits>
#include <cstdint>
#include <stdexcept>

#include "net/token.hpp"

namespace warm::net {

namespace {

// Appends `field` preceded by its length (8 bytes, little-endian).
void append_field(std::string& out, std::string_view field) {
  std::uint64_t n = field.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(field.data(), field.size());
}

}  // namespace

std::string peer_nonce() {
  std::string nonce(peer_nonce_bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1)
    throw std::runtime_error("no random bytes for a login nonce");
  return nonce;
}

std::string peer_proof(std::string_view token, peer_role role, std::string_view server_nonce,
                       std::string_view client_nonce, std::string_view address) {
  std::string input;
  input.reserve(64 + server_nonce.size() + client_nonce.size() + address.size());
  append_field(input, role == peer_role::caller ? "warm peer login" : "warm peer answer");
  append_field(input, server_nonce);
  append_field(input, client_nonce);
  append_field(input, address);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (token.size() > INT_MAX || HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
                                     reinterpret_cast<const unsigned char*>(input.data()),
                                     input.size(), mac, &size) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(mac), size);
}

bool peer_proof_matches(std::string_view presented, std::string_view token, peer_role role,
                        std::string_view server_nonce, std::string_view client_nonce,
                        std::string_view address) {
  return constant_time_equal(presented,
                             peer_proof(token, role, server_nonce, client_nonce, address));
}

}  // namespace warm::net
