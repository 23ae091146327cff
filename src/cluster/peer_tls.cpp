#include "cluster/peer_tls.hpp"

#include <arpa/inet.h>
#include <openssl/x509v3.h>

#include "net/pem.hpp"
#include "net/tls.hpp"

namespace warm::cluster {

void peer_tls::set(const net::tls_material& material) {
  std::lock_guard<std::mutex> lock(mutex_);
  options_.ca_pem = material.client_ca_pem;
  options_.cert_pem = material.cert_pem;
  options_.key_pem = material.key_pem;
  ++generation_;
}

std::pair<rpc::tls_client_options, std::uint64_t> peer_tls::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {options_, generation_};
}

std::shared_ptr<rpc::tls_client> peer_tls_contexts::context() {
  auto [options, generation] = tls_->current();
  if (!context_ || generation != generation_) {
    context_ = rpc::make_tls_client(options);
    generation_ = generation;
  }
  return context_;
}

std::string host_of(const std::string& address) {
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon == std::string::npos ? address.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host;
}

std::string advertised_tls_problem(const std::string& address, const net::tls_material& material) {
  if (address.rfind("unix:", 0) == 0) return {};
  auto host = host_of(address);
  unsigned char ip[16];
  if (::inet_pton(AF_INET, host.c_str(), ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), ip) == 1)
    return "peers check the certificate of " + address +
           " against a DNS name, not an IP address: advertise a host name the certificate carries "
           "(--advertise NAME:PORT)";
  auto chain = net::pem_certificates(material.cert_pem);
  if (chain.empty() ||
      X509_check_host(chain.front().get(), host.data(), host.size(), 0, nullptr) != 1)
    return "the certificate (" + material.subject + ") does not name " + host +
           ", the host peers dial (--advertise): they would refuse it";
  return {};
}

}  // namespace warm::cluster
