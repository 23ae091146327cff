// PEM text read into OpenSSL's objects, owned: what the TLS code of net (tls.cpp, tls_server.cpp)
// and its users share. Pure (no files, no sockets); each function clears the thread's OpenSSL
// error queue before it returns.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

namespace warm::net {

template <class T, void (*Free)(T*)>
struct openssl_free {
  void operator()(T* p) const { Free(p); }
};
using bio_ptr = std::unique_ptr<BIO, openssl_free<BIO, BIO_free_all>>;
using x509_ptr = std::unique_ptr<X509, openssl_free<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, openssl_free<EVP_PKEY, EVP_PKEY_free>>;

// Every certificate of a PEM text, in order; none when it holds none, and only those before the
// first malformed block.
std::vector<x509_ptr> pem_certificates(const std::string& pem);

// The first private key of a PEM text; null when there is none or it is encrypted (no password is
// ever asked for).
pkey_ptr pem_private_key(const std::string& pem);

// Each "-----BEGIN CERTIFICATE-----" block of a PEM text as a text of its own, in order (kj trusts
// only the first certificate of each TlsCertificate, so a bundle is handed over split). A block
// without its END line ends the list.
std::vector<std::string> pem_certificate_blocks(const std::string& pem);

}  // namespace warm::net
