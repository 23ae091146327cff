// The bootstrap capability of a connection that must log in before it reaches Warm (a TCP
// listener with a token): rpc::authenticator. Two ways in, both answered on the RPC thread:
//   - authenticate(token): a client presents the token itself.
//   - challenge, then prove: an instance of the cluster shows it holds the token without sending
//     it, and the server shows the same in its answer (src/net/peer_proof.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "warm.capnp.h"

namespace warm::net {
class login_limiter;
}

namespace warm::rpc {

// What an authenticator knows of its connection besides the token.
struct login_options {
  std::shared_ptr<net::login_limiter> limiter;  // failed logins per peer; null: no limit, no report
  std::string peer;                             // the peer's address, as the limiter keys it
  std::function<void()> on_login;               // called on the RPC thread after each right login
  // The address this server is reached at in its cluster (its advertised address): a prove must
  // name it. Empty: not in a cluster, every prove is refused.
  std::string cluster_address;
};

// Hands out `warm` for the right token, or the right proof of it, compared in constant time. A
// wrong one is reported to the limiter (which logs it, never the token); while the peer's budget
// of failures is spent every attempt is answered unauthenticated with when to retry, without
// being checked. A right one is never refused (a shared NAT or a proxy speaks for many clients).
class authenticator final : public Authenticator::Server {
 public:
  authenticator(std::string token, Warm::Client warm, login_options login = {});

 protected:
  kj::Promise<void> authenticate(AuthenticateContext context) override;
  kj::Promise<void> challenge(ChallengeContext context) override;
  kj::Promise<void> prove(ProveContext context) override;

 private:
  // Sets `status` to unauthenticated for a failed login, `why` unless the peer's budget of
  // failures is spent (then: when to retry); counts the failure.
  void refuse(Status::Builder status, const char* why);

  std::string token_;
  Warm::Client warm_;
  login_options login_;
  std::string nonce_;  // the last challenge's, until a prove uses it; empty: none
};

}  // namespace warm::rpc
