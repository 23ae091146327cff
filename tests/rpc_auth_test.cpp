// rpc::authenticator's logins (src/rpc/authenticator.hpp), called through Cap'n Proto on one
// event loop: the token, and the cluster's challenge and proof, each with what must refuse it
// (a wrong proof, the wrong address, a replayed or missing challenge, a short nonce) and the
// failures counted against the peer.
#include <catch2/catch.hpp>

#include <capnp/capability.h>
#include <kj/async.h>
#include <kj/debug.h>

#include <memory>
#include <string>

#include "net/login_limiter.hpp"
#include "net/peer_proof.hpp"
#include "rpc/authenticator.hpp"

namespace r = warm::rpc;
using Code = r::Status::Code;
using warm::net::peer_nonce;
using warm::net::peer_proof;
using warm::net::peer_role;

namespace {

const std::string token = "the-cluster-token-0123456789";
const std::string here = "10.0.0.7:7000";

std::string bytes(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}
capnp::Data::Reader data(const std::string& b) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(b.data()), b.size());
}

struct fixture {
  kj::EventLoop loop;
  kj::WaitScope ws{loop};
  int failures = 0;
  int logins = 0;
  std::shared_ptr<warm::net::login_limiter> limiter;
  r::Authenticator::Client auth;

  explicit fixture(std::string cluster_address = here)
      : limiter(make_limiter(failures)), auth(make(std::move(cluster_address))) {}

  static std::shared_ptr<warm::net::login_limiter> make_limiter(int& failures) {
    warm::net::login_limiter::options o;
    o.failures_per_minute = 100;
    o.on_failure = [&failures](const std::string&, const std::string&, bool) { ++failures; };
    return std::make_shared<warm::net::login_limiter>(std::move(o));
  }
  r::Authenticator::Client make(std::string cluster_address) {
    r::login_options o;
    o.limiter = limiter;
    o.peer = "10.0.0.9";
    o.on_login = [this] { ++logins; };
    o.cluster_address = std::move(cluster_address);
    // A Warm that only exists to be handed out.
    r::Warm::Client warm =
        capnp::Capability::Client(KJ_EXCEPTION(FAILED, "not a real Warm")).castAs<r::Warm>();
    return kj::heap<r::authenticator>(token, kj::mv(warm), kj::mv(o));
  }

  std::string challenge() { return bytes(auth.challengeRequest().send().wait(ws).getNonce()); }

  // A prove with `proof_token`'s proof over the server nonce, naming `address`.
  capnp::Response<r::Authenticator::ProveResults> prove(const std::string& server_nonce,
                                                        const std::string& client_nonce,
                                                        const std::string& address,
                                                        const std::string& proof_token = token,
                                                        const std::string& proof_address = "") {
    auto req = auth.proveRequest();
    req.setAddress(address);
    req.setNonce(data(client_nonce));
    req.setProof(data(peer_proof(proof_token, peer_role::caller, server_nonce, client_nonce,
                                 proof_address.empty() ? address : proof_address)));
    return req.send().wait(ws);
  }
};

}  // namespace

TEST_CASE("a right proof logs in, and the answer proves the server holds the token") {
  fixture f;
  auto server_nonce = f.challenge();
  CHECK(server_nonce.size() == warm::net::peer_nonce_bytes);
  auto client_nonce = peer_nonce();
  auto res = f.prove(server_nonce, client_nonce, here);
  REQUIRE(res.getStatus().getCode() == Code::OK);
  CHECK(res.hasWarm());
  CHECK(bytes(res.getProof()) ==
        peer_proof(token, peer_role::listener, server_nonce, client_nonce, here));
  CHECK(f.logins == 1);
  CHECK(f.failures == 0);
  // Each challenge is new.
  CHECK(f.challenge() != server_nonce);
}

TEST_CASE("wrong proofs, addresses and nonces are refused and counted") {
  fixture f;
  auto client_nonce = peer_nonce();
  SECTION("a proof made with another token") {
    auto res = f.prove(f.challenge(), client_nonce, here, "the-cluster-token-0123456780");
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
    CHECK(std::string(res.getStatus().getMessage().cStr()) == "wrong proof");
  }
  SECTION("a right proof for another address: what an impostor relays") {
    auto res = f.prove(f.challenge(), client_nonce, "10.0.0.66:7000");
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
  }
  SECTION("a proof bound to another address than the one named") {
    auto res = f.prove(f.challenge(), client_nonce, here, token, "10.0.0.66:7000");
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
  }
  SECTION("a proof over another server nonce") {
    f.challenge();
    auto res = f.prove(peer_nonce(), client_nonce, here);
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
  }
  SECTION("a client nonce that is not 32 bytes") {
    auto res = f.prove(f.challenge(), "short", here);
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
  }
  SECTION("no challenge first") {
    auto res = f.prove("", client_nonce, here);
    CHECK(res.getStatus().getCode() == Code::UNAUTHENTICATED);
    CHECK(std::string(res.getStatus().getMessage().cStr()) == "no challenge to prove");
  }
  CHECK_FALSE(f.prove("", client_nonce, here).getStatus().getCode() == Code::OK);
  CHECK(f.logins == 0);
  CHECK(f.failures == 2);
}

TEST_CASE("a challenge serves one prove: a replay of the same proof is refused") {
  fixture f;
  auto server_nonce = f.challenge();
  auto client_nonce = peer_nonce();
  REQUIRE(f.prove(server_nonce, client_nonce, here).getStatus().getCode() == Code::OK);
  auto again = f.prove(server_nonce, client_nonce, here);
  CHECK(again.getStatus().getCode() == Code::UNAUTHENTICATED);
  CHECK_FALSE(again.hasWarm());
  // A failed prove uses its challenge up too: guessing again needs a new one.
  auto next = f.challenge();
  CHECK(f.prove(next, client_nonce, here, "guess").getStatus().getCode() == Code::UNAUTHENTICATED);
  CHECK(f.prove(next, client_nonce, here).getStatus().getCode() == Code::UNAUTHENTICATED);
  CHECK(f.logins == 1);
}

TEST_CASE("a server outside a cluster refuses every prove; the token still logs in") {
  fixture f("");
  auto server_nonce = f.challenge();
  auto client_nonce = peer_nonce();
  CHECK(f.prove(server_nonce, client_nonce, "").getStatus().getCode() == Code::UNAUTHENTICATED);
  auto login = f.auth.authenticateRequest();
  login.setToken(token);
  CHECK(login.send().wait(f.ws).getStatus().getCode() == Code::OK);
  auto wrong = f.auth.authenticateRequest();
  wrong.setToken(token + "x");
  CHECK(wrong.send().wait(f.ws).getStatus().getCode() == Code::UNAUTHENTICATED);
  CHECK(f.logins == 1);
  CHECK(f.failures == 2);
}
