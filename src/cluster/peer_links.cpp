#include "cluster/peer_links.hpp"

#include "net/peer_proof.hpp"
#include "rpc/bytes.hpp"

namespace warm::cluster {

peer_links::peer_links(kj::AsyncIoProvider& io, std::string token,
                       std::chrono::milliseconds connect_timeout,
                       std::shared_ptr<const peer_tls> tls)
    : io_(io), token_(std::move(token)), connect_timeout_(connect_timeout) {
  if (tls) tls_.emplace(std::move(tls));
}

std::shared_ptr<peer_link> peer_links::get(const std::string& address) {
  auto& slot = links_[address];
  if (slot && !slot->lost) return slot;
  slot = std::make_shared<peer_link>();
  slot->address = address;
  auto* p = slot.get();  // the chain below is owned by the link: a raw pointer cannot dangle
  auto connected =
      io_.getNetwork()
          .parseAddress(address)
          .then([](kj::Own<kj::NetworkAddress> a) {
            auto c = a->connect();
            return c.attach(kj::mv(a));
          })
          .then([this, p](kj::Own<kj::AsyncIoStream> s) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
            if (!tls_ || p->address.rfind("unix:", 0) == 0) return kj::mv(s);
            p->tls = tls_->context();
            return p->tls->context->wrapClient(kj::mv(s), host_of(p->address));
          })
          .then([this, p](kj::Own<kj::AsyncIoStream> s) -> kj::Promise<rpc::Warm::Client> {
            p->stream = kj::mv(s);
            capnp::ReaderOptions limits;
            limits.traversalLimitInWords = std::uint64_t{1}
                                           << 31;  // peers are trusted: large results
            p->network = kj::heap<capnp::TwoPartyVatNetwork>(
                *p->stream, capnp::rpc::twoparty::Side::CLIENT, limits);
            p->rpc = kj::heap(capnp::makeRpcClient(*p->network));
            p->watch =
                p->network->onDisconnect().then([p] { p->lost = true; }).eagerlyEvaluate(nullptr);
            capnp::MallocMessageBuilder vat;
            auto id = vat.initRoot<capnp::rpc::twoparty::VatId>();
            id.setSide(capnp::rpc::twoparty::Side::SERVER);
            auto bootstrap = p->rpc->bootstrap(id);
            if (token_.empty()) {
              auto resolved = bootstrap.whenResolved();
              return resolved.then([bootstrap]() mutable { return bootstrap.castAs<rpc::Warm>(); });
            }
            // A login that never sends the token (net/peer_proof.hpp): whoever listens at this
            // address learns nothing it could log in with, here or anywhere else.
            auto auth = bootstrap.castAs<rpc::Authenticator>();
            return auth.challengeRequest().send().then(
                [this, auth, address = p->address](
                    capnp::Response<rpc::Authenticator::ChallengeResults>&& c) mutable {
                  auto server_nonce = rpc::to_bytes(c.getNonce());
                  auto client_nonce = net::peer_nonce();
                  auto prove = auth.proveRequest();
                  prove.setAddress(address);
                  prove.setNonce(rpc::as_data(client_nonce));
                  prove.setProof(rpc::as_data(net::peer_proof(
                      token_, net::peer_role::caller, server_nonce, client_nonce, address)));
                  return prove.send().then(
                      [this, server_nonce, client_nonce,
                       address](capnp::Response<rpc::Authenticator::ProveResults>&& reply) {
                        if (reply.getStatus().getCode() != rpc::Status::Code::OK)
                          KJ_FAIL_REQUIRE("the peer refused this instance's login",
                                          reply.getStatus().getMessage());
                        if (!net::peer_proof_matches(rpc::to_bytes(reply.getProof()), token_,
                                                     net::peer_role::listener, server_nonce,
                                                     client_nonce, address))
                          KJ_FAIL_REQUIRE("the peer does not hold the cluster's token", address);
                        return reply.getWarm();
                      });
                });
          });
  p->warm = io_.getTimer()
                .timeoutAfter(connect_timeout_.count() * kj::MILLISECONDS, kj::mv(connected))
                .then([](rpc::Warm::Client w) { return w; },
                      [p](kj::Exception&& e) -> rpc::Warm::Client {
                        p->lost = true;
                        kj::throwFatalException(kj::mv(e));
                      })
                .fork();
  return slot;
}

}  // namespace warm::cluster
