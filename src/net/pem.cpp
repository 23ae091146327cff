#include "net/pem.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>

namespace warm::net {

namespace {

bio_ptr memory_bio(const std::string& text) {
  return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// A password callback that has none: an encrypted key fails to load instead of prompting.
int no_password(char*, int, int, void*) {
  return 0;
}

}  // namespace

std::vector<x509_ptr> pem_certificates(const std::string& pem) {
  std::vector<x509_ptr> out;
  auto bio = memory_bio(pem);
  while (bio) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!cert) break;
    out.emplace_back(cert);
  }
  ERR_clear_error();  // the read past the last certificate leaves an error behind
  return out;
}

pkey_ptr pem_private_key(const std::string& pem) {
  auto bio = memory_bio(pem);
  pkey_ptr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr) : nullptr);
  ERR_clear_error();
  return key;
}

std::vector<std::string> pem_certificate_blocks(const std::string& pem) {
  static const std::string begin = "-----BEGIN CERTIFICATE-----";
  static const std::string end = "-----END CERTIFICATE-----";
  std::vector<std::string> out;
  for (auto at = pem.find(begin); at != std::string::npos; at = pem.find(begin, at)) {
    auto stop = pem.find(end, at);
    if (stop == std::string::npos) break;
    stop += end.size();
    out.push_back(pem.substr(at, stop - at) + "\n");
    at = stop;
  }
  return out;
}

}  // namespace warm::net
