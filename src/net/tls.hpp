// TLS for warmd's TCP fronts (Cap'n Proto, HTTP, gRPC) and its clients: the certificate, key and
// client-CA files an operator names, read and checked as one set. A front is configured from one
// such snapshot; a reload (SIGHUP) that finds a broken set keeps serving with the old one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace warm::net {

// The files, as given (--tls-cert, --tls-key, --tls-client-ca).
struct tls_files {
  std::string cert;  // PEM: the certificate chain, leaf first
  std::string key;   // PEM: the leaf's private key (unencrypted); group and others may not read it
  std::string client_ca;  // PEM: CAs one of which must have signed a client's certificate (mutual
                          // TLS); empty: clients present none
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// What the files held when read, checked: PEM text as read.
struct tls_material {
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;  // empty without a client CA
  std::string subject;        // the leaf certificate's subject, for the log ("CN=warm.example")
  std::string not_after;      // when it expires ("Nov 27 12:00:00 2027 GMT")
  bool expired = false;       // past not_after at load (served anyway; the log says so)
};

// The largest file read as a certificate, key or CA bundle.
inline constexpr std::uint64_t max_tls_file_bytes = 1 << 20;

// Reads and checks a set into `out`. False, with `error` naming the file (never a key's bytes),
// when: only one of cert and key is given; a file is missing, not a regular file, or over
// max_tls_file_bytes; the key file may be read or written by group or others (chmod 600 it); the
// certificate chain, the key or the CA bundle does not parse as PEM; the key is not the leaf
// certificate's. Blocking file reads: call it off event-loop threads, or at start.
bool load_tls(const tls_files& files, tls_material& out, std::string& error);

// One line for the log: "TLS with CN=x (expires …)[, clients need a certificate from CA.pem]".
std::string describe(const tls_material& m, const tls_files& files);

}  // namespace warm::net
