#include "rpc/authenticator.hpp"

#include <chrono>

#include "net/login_limiter.hpp"
#include "net/peer_proof.hpp"
#include "net/token.hpp"
#include "rpc/bytes.hpp"
#include "rpc/convert.hpp"

namespace warm::rpc {

authenticator::authenticator(std::string token, Warm::Client warm, login_options login)
    : token_(std::move(token)), warm_(kj::mv(warm)), login_(std::move(login)) {}

void authenticator::refuse(Status::Builder status, const char* why) {
  auto now = net::login_limiter::clock::now();
  std::chrono::seconds retry_after{0};
  if (login_.limiter && !login_.limiter->allow(login_.peer, "rpc", now, &retry_after)) {
    set_status(status, Status::Code::UNAUTHENTICATED,
               "too many failed logins from this address; retry in " +
                   std::to_string(retry_after.count()) + " s");
    return;
  }
  if (login_.limiter) login_.limiter->failed(login_.peer, "rpc", now);
  set_status(status, Status::Code::UNAUTHENTICATED, why);
}

kj::Promise<void> authenticator::authenticate(AuthenticateContext context) {
  auto results = context.getResults();
  // The token first: only wrong ones are counted and limited.
  auto token = to_std(context.getParams().getToken());
  if (token_.empty() || !net::constant_time_equal(token, token_)) {
    refuse(results.getStatus(), "wrong token");
    return kj::READY_NOW;
  }
  set_ok(results.getStatus());
  results.setWarm(warm_);
  if (login_.on_login) login_.on_login();
  return kj::READY_NOW;
}

kj::Promise<void> authenticator::challenge(ChallengeContext context) {
  nonce_ = net::peer_nonce();
  context.getResults().setNonce(as_data(nonce_));
  return kj::READY_NOW;
}

kj::Promise<void> authenticator::prove(ProveContext context) {
  auto params = context.getParams();
  auto results = context.getResults();
  auto server_nonce = std::exchange(nonce_, {});  // each challenge serves one prove
  auto address = to_std(params.getAddress());
  auto client_nonce = to_bytes(params.getNonce());
  const bool right =
      !token_.empty() && !server_nonce.empty() && !login_.cluster_address.empty() &&
      client_nonce.size() == net::peer_nonce_bytes &&
      net::peer_proof_matches(to_bytes(params.getProof()), token_, net::peer_role::caller,
                              server_nonce, client_nonce, address);
  // The address is not secret: checked after the proof, so that a wrong proof costs the same
  // whatever address it names.
  if (!right || address != login_.cluster_address) {
    refuse(results.getStatus(), server_nonce.empty() ? "no challenge to prove" : "wrong proof");
    return kj::READY_NOW;
  }
  set_ok(results.getStatus());
  results.setWarm(warm_);
  results.setProof(as_data(
      net::peer_proof(token_, net::peer_role::listener, server_nonce, client_nonce, address)));
  if (login_.on_login) login_.on_login();
  return kj::READY_NOW;
}

}  // namespace warm::rpc
