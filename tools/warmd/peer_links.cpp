#include "peer_links.hpp"

namespace warm::warmd {

peer_links::peer_links(kj::AsyncIoProvider& io, std::string token, std::chrono::milliseconds connect_timeout)
    : io_(io), token_(std::move(token)), connect_timeout_(connect_timeout) {}

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
          .then([this, p](kj::Own<kj::AsyncIoStream> s) -> kj::Promise<rpc::Warm::Client> {
            p->stream = kj::mv(s);
            capnp::ReaderOptions limits;
            limits.traversalLimitInWords = std::uint64_t{1} << 31;  // peers are trusted: large results
            p->network = kj::heap<capnp::TwoPartyVatNetwork>(*p->stream, capnp::rpc::twoparty::Side::CLIENT, limits);
            p->rpc = kj::heap(capnp::makeRpcClient(*p->network));
            p->watch = p->network->onDisconnect().then([p] { p->lost = true; }).eagerlyEvaluate(nullptr);
            capnp::MallocMessageBuilder vat;
            auto id = vat.initRoot<capnp::rpc::twoparty::VatId>();
            id.setSide(capnp::rpc::twoparty::Side::SERVER);
            auto bootstrap = p->rpc->bootstrap(id);
            if (token_.empty()) {
              auto resolved = bootstrap.whenResolved();
              return resolved.then([bootstrap]() mutable { return bootstrap.castAs<rpc::Warm>(); });
            }
            auto login = bootstrap.castAs<rpc::Authenticator>().authenticateRequest();
            login.setToken(token_);
            return login.send().then([](capnp::Response<rpc::Authenticator::AuthenticateResults>&& reply) {
              if (reply.getStatus().getCode() != rpc::Status::Code::OK)
                KJ_FAIL_REQUIRE("the peer refused the cluster's token", reply.getStatus().getMessage());
              return reply.getWarm();
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

}  // namespace warm::warmd
