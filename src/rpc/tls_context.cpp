#include "rpc/tls_context.hpp"

#include "net/pem.hpp"
#include "net/tls.hpp"

namespace warm::rpc {

namespace {

std::vector<kj::TlsCertificate> parse_all(const std::string& pem) {
  std::vector<kj::TlsCertificate> out;
  for (const auto& one : net::pem_certificate_blocks(pem))
    out.emplace_back(kj::StringPtr(one.c_str()));
  return out;
}

}  // namespace

std::shared_ptr<tls_server> make_tls_server(const net::tls_material& material, kj::Timer& timer,
                                            std::chrono::nanoseconds handshake_timeout) {
  auto s = std::make_shared<tls_server>();
  s->keypair.emplace(kj::TlsKeypair{kj::TlsPrivateKey(kj::StringPtr(material.key_pem.c_str())),
                                    kj::TlsCertificate(kj::StringPtr(material.cert_pem.c_str()))});
  kj::TlsContext::Options options;
  options.defaultKeypair = *s->keypair;
  if (!material.client_ca_pem.empty()) {
    s->client_cas = parse_all(material.client_ca_pem);
    options.verifyClients = true;
    options.useSystemTrustStore = false;
    options.trustedCertificates = kj::arrayPtr(s->client_cas.data(), s->client_cas.size());
  }
  options.timer = timer;
  options.acceptTimeout = handshake_timeout.count() * kj::NANOSECONDS;
  s->context = kj::heap<kj::TlsContext>(kj::mv(options));
  return s;
}

std::shared_ptr<tls_client> make_tls_client(const tls_client_options& o) {
  auto c = std::make_shared<tls_client>();
  kj::TlsContext::Options options;
  if (!o.ca_pem.empty()) {
    c->trusted = parse_all(o.ca_pem);
    options.useSystemTrustStore = false;
    options.trustedCertificates = kj::arrayPtr(c->trusted.data(), c->trusted.size());
  }
  if (!o.cert_pem.empty()) {
    c->keypair.emplace(kj::TlsKeypair{kj::TlsPrivateKey(kj::StringPtr(o.key_pem.c_str())),
                                      kj::TlsCertificate(kj::StringPtr(o.cert_pem.c_str()))});
    options.defaultKeypair = *c->keypair;
  }
  c->context = kj::heap<kj::TlsContext>(kj::mv(options));
  return c;
}

}  // namespace warm::rpc
