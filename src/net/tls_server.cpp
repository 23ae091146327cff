#include "net/tls_server.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "net/pem.hpp"
#include "net/tls.hpp"

namespace warm::net {

namespace {

using ctx_ptr = std::unique_ptr<SSL_CTX, openssl_free<SSL_CTX, SSL_CTX_free>>;

// The socket BIO of a session: OpenSSL's own writes with write(2) (SIGPIPE on a reset peer) and
// blocks on a blocking socket; this one sends with MSG_NOSIGNAL and reads and writes with
// MSG_DONTWAIT, so a front's sockets stay as they are (the HTTP gate's block; its plain ones are
// read the same way) and no session call ever waits. The descriptor is the BIO's data; it is never
// closed here.
int socket_of(BIO* b) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b)));
}

int bio_write(BIO* b, const char* data, int size) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do
    n = ::send(socket_of(b), data, static_cast<std::size_t>(size), MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* data, int size) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do
    n = ::recv(socket_of(b), data, static_cast<std::size_t>(size), MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

int bio_puts(BIO* b, const char* text) {
  return bio_write(b, text, static_cast<int>(std::strlen(text)));
}

long bio_ctrl(BIO*, int command, long, void*) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here; nothing else applies
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

// Made once, kept for the process (sessions may be freed at any time, even at exit).
const BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "warm socket");
    if (!m) return m;
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_puts(m, bio_puts);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    return m;
  }();
  return method;
}

// ALPN's wire form of `name` (its length, then its bytes), kept for the process: a session's
// handshake may run after its ssl_server was replaced, while the SSL_CTX it holds lives on.
const std::string* interned_alpn(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;  // nodes never move
  std::lock_guard<std::mutex> lock(mutex);
  return &*names.insert(static_cast<char>(name.size()) + name).first;
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* out_length,
                const unsigned char* offered, unsigned int offered_length, void* wire) {
  const auto& ours = *static_cast<const std::string*>(wire);
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_length,
                            reinterpret_cast<const unsigned char*>(ours.data()),
                            static_cast<unsigned int>(ours.size()), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // RFC 7301: no_application_protocol
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

warm::error refused(const std::string& what) {
  return make_error(errc::invalid_argument, "TLS: " + what + ": " + tls_error_text());
}

}  // namespace

std::string tls_error_text() {
  unsigned long code = ERR_peek_last_error();
  std::string text = "unknown";
  if (code) {
    const char* reason = ERR_reason_error_string(code);
    text = reason ? reason : "error " + std::to_string(code);
  }
  ERR_clear_error();
  return text;
}

expected<std::shared_ptr<const ssl_server>> ssl_server::make(const tls_material& m,
                                                             const std::string& alpn) {
  if (alpn.empty() || alpn.size() > 255)
    return make_error(errc::invalid_argument, "TLS: an ALPN name of 1 to 255 bytes");
  ERR_clear_error();
  ctx_ptr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx || !socket_method()) return refused("cannot make a context");
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                             SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Writes return once a record is sent (httplib loops), may be retried from a moved buffer, and
  // an idle session gives its read and write buffers back.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                          SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(c, 1);
  // Tickets of one front's protocol are not taken by another's.
  SSL_CTX_set_session_id_context(c, reinterpret_cast<const unsigned char*>(alpn.data()),
                                 static_cast<unsigned int>(alpn.size()));

  auto chain = pem_certificates(m.cert_pem);
  if (chain.empty())
    return make_error(errc::invalid_argument, "TLS: the certificate file holds no PEM certificate");
  if (SSL_CTX_use_certificate(c, chain.front().get()) != 1) return refused("the certificate");
  for (std::size_t i = 1; i < chain.size(); ++i)
    if (SSL_CTX_add1_chain_cert(c, chain[i].get()) != 1) return refused("the certificate chain");
  auto key = pem_private_key(m.key_pem);
  if (!key) return refused("the private key");
  if (SSL_CTX_use_PrivateKey(c, key.get()) != 1 || SSL_CTX_check_private_key(c) != 1)
    return refused("the private key");

  if (!m.client_ca_pem.empty()) {
    auto cas = pem_certificates(m.client_ca_pem);
    if (cas.empty())
      return make_error(errc::invalid_argument, "TLS: the client CA file holds no PEM certificate");
    X509_STORE* store = SSL_CTX_get_cert_store(c);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    if (!names) return refused("the client CAs");
    SSL_CTX_set_client_CA_list(c, names);  // owned by the context from here
    for (auto& ca : cas) {
      if (X509_STORE_add_cert(store, ca.get()) != 1) return refused("a client CA");
      X509_NAME* name = X509_NAME_dup(X509_get_subject_name(ca.get()));
      if (!name || !sk_X509_NAME_push(names, name)) {
        X509_NAME_free(name);
        return refused("a client CA's name");
      }
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(c, select_alpn, const_cast<std::string*>(interned_alpn(alpn)));
  ERR_clear_error();
  return std::shared_ptr<const ssl_server>(new ssl_server(ctx.release(), m.subject));
}

ssl_server::~ssl_server() {
  SSL_CTX_free(ctx_);
}

ssl_ptr ssl_server::open(int fd) const {
  ssl_ptr ssl(SSL_new(ctx_));
  BIO* bio = ssl ? BIO_new(socket_method()) : nullptr;
  if (!bio) {
    ERR_clear_error();
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  SSL_set_bio(ssl.get(), bio, bio);  // the session owns it
  SSL_set_accept_state(ssl.get());
  return ssl;
}

}  // namespace warm::net
