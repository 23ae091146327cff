#include "cluster/relay.hpp"

#include "cluster/cluster_mode.hpp"

namespace warm::cluster {

rpc_relay::rpc_relay(kj::AsyncIoProvider& io, cluster_mode& cluster, std::string token,
                     std::shared_ptr<const peer_tls> tls, std::chrono::milliseconds call_timeout,
                     std::function<void(const std::string&)> log)
    : cluster_(cluster),
      links_(io, std::move(token), std::chrono::seconds(2), std::move(tls)),
      call_timeout_(call_timeout),
      log_(std::move(log)) {}

std::uint32_t rpc_relay::in_flight(const std::string& address) const {
  auto it = in_flight_.find(address);
  return it == in_flight_.end() ? 0 : it->second;
}

void rpc_relay::finished(const std::string& address) {
  if (auto it = in_flight_.find(address); it != in_flight_.end() && --it->second == 0)
    in_flight_.erase(it);
}

kj::Maybe<kj::Promise<void>> rpc_relay::infer(rpc::infer_context context,
                                              std::function<kj::Promise<void>()> serve_here) {
  auto request = context.getParams().getRequest();
  if (request.getForwarded()) return nullptr;  // one hop
  const std::string model = request.getTarget();
  auto address =
      cluster_.relay_address(model, [this](const std::string& a) { return in_flight(a); });
  if (address.empty()) return nullptr;
  auto link = links_.get(address);
  ++in_flight_[address];
  auto self = shared_from_this();  // calls may outlive the connection's server; not the relay
  auto call = link->warm.addBranch().then([context](rpc::Warm::Client warm) mutable {
    auto out = warm.inferRequest();
    out.setRequest(context.getParams().getRequest());
    out.getRequest().setForwarded(true);
    return out.send();
  });
  auto fall_back = [self, link, address, model, serve_here](std::string why) {
    self->cluster_.relayed(false);
    if (self->log_)
      self->log_("cluster: cannot forward " + model + " to " + address + ": " + why +
                 "; serving it here");
    return serve_here();
  };
  return links_.timer()
      .timeoutAfter(call_timeout_.count() * kj::MILLISECONDS, kj::mv(call))
      .then(
          [self, context, address, fall_back](
              capnp::Response<rpc::Warm::InferResults>&& reply) mutable -> kj::Promise<void> {
            self->finished(address);
            auto status = reply.getStatus();
            if (status.getCode() == rpc::Status::Code::UNAVAILABLE)
              return fall_back(std::string("it is unavailable: ") + status.getMessage().cStr());
            self->cluster_.relayed(true);
            auto results = context.getResults();
            results.setStatus(status);
            if (reply.hasResult()) results.setResult(reply.getResult());
            return kj::READY_NOW;
          },
          [self, link, address, fall_back](kj::Exception&& e) mutable -> kj::Promise<void> {
            self->finished(address);
            link->lost = true;  // connect again next time
            return fall_back(e.getDescription().cStr());
          });
}

}  // namespace warm::cluster
