// How two instances of a cluster show each other that they hold the cluster's token without
// sending it (rpc::authenticator's challenge and prove; warmd's peer links).
//
// The exchange, over one connection:
//   1. The caller asks the listener for a challenge: a fresh random nonce (server nonce).
//   2. The caller picks its own nonce and sends it with the address it dialed and
//      client_proof = HMAC-SHA256(token, "warm peer login" | server nonce | client nonce |
//      address).
//   3. The listener checks the proof, and that the address is the one it is reached at in the
//      cluster (its advertised address), then answers with its capability and
//      server_proof = HMAC-SHA256(token, "warm peer answer" | the same three).
//   4. The caller uses the capability only when server_proof is right.
//
// What it protects against:
//   - Someone who gets a caller to dial them (a forged instance record) learns a proof bound to
//     nonces and to their own address: not the token, and nothing the real instances accept
//     (their address differs, and their nonces are fresh), so relaying it to one fails.
//   - A listener that does not hold the token cannot answer step 3, so a caller never sends its
//     requests to an impostor.
//   - Replays: each server nonce serves one prove.
// What it does not: someone on the network path between two real instances can still read and
// change the traffic after the login (use TLS for that).
//
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace warm::net {

inline constexpr std::size_t peer_nonce_bytes = 32;

// peer_nonce_bytes from the operating system's random source (OpenSSL's RAND_bytes). Throws
// std::runtime_error in the unlikely case that none can be had: a login must not go on with a
// predictable nonce.
std::string peer_nonce();

enum class peer_role { caller, listener };

// The proof of `role` for one exchange (32 bytes): HMAC-SHA256 keyed with `token` over a label
// naming the role and the three fields, each preceded by its length so that no two different
// triples give the same input.
std::string peer_proof(std::string_view token, peer_role role, std::string_view server_nonce,
                       std::string_view client_nonce, std::string_view address);

// Whether `presented` is the proof of `role` for this exchange, compared in constant time.
bool peer_proof_matches(std::string_view presented, std::string_view token, peer_role role,
                        std::string_view server_nonce, std::string_view client_nonce,
                        std::string_view address);

}  // namespace warm::net
