#include "net/tls.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace warm::net {

namespace {

template <class T, void (*Free)(T*)>
struct freer {
  void operator()(T* p) const { Free(p); }
};
using bio_ptr = std::unique_ptr<BIO, freer<BIO, BIO_free_all>>;
using x509_ptr = std::unique_ptr<X509, freer<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, freer<EVP_PKEY, EVP_PKEY_free>>;

// What a failed read or check says.
struct failure {
  std::string message;
};

failure bad(const std::string& file, const std::string& what) { return {"TLS: " + file + ": " + what}; }

// A file's bytes, or why not.
struct file_text {
  std::string text;
  std::string error;  // empty: read
};

// The file's bytes: a regular file of at most max_tls_file_bytes; with `secret`, one that group
// and others may neither read nor write.
file_text read_file(const std::string& path, bool secret) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return {{}, bad(path, "cannot be opened").message};
  struct stat st {};
  std::string text;
  auto fail = [&](const std::string& why) {
    ::close(fd);
    return file_text{{}, bad(path, why).message};
  };
  if (::fstat(fd, &st) != 0) return fail("cannot be read");
  if (!S_ISREG(st.st_mode)) return fail("is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_tls_file_bytes)
    return fail("is larger than " + std::to_string(max_tls_file_bytes) + " bytes");
  if (secret && (st.st_mode & 077) != 0)
    return fail("a private key that group or others may read or write (chmod 600 it)");
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < text.size()) {
    auto n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot be read");
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return {std::move(text), {}};
}

bio_ptr memory_bio(const std::string& text) {
  return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every certificate in a PEM text, in order (none when the text holds none or is malformed).
std::vector<x509_ptr> certificates(const std::string& pem) {
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

// A password callback that has none: an encrypted key fails to load instead of prompting.
int no_password(char*, int, int, void*) { return 0; }

std::string text_of(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

bool load_tls(const tls_files& files, tls_material& out, std::string& error) {
  auto refuse = [&error](const failure& f) {
    error = f.message;
    return false;
  };
  if (files.cert.empty() || files.key.empty())
    return refuse({"TLS needs both a certificate (--tls-cert) and its key (--tls-key)"});
  tls_material m;
  auto cert = read_file(files.cert, false);
  if (!cert.error.empty()) return refuse({cert.error});
  auto key = read_file(files.key, true);
  if (!key.error.empty()) return refuse({key.error});
  m.cert_pem = std::move(cert.text);
  m.key_pem = std::move(key.text);

  auto chain = certificates(m.cert_pem);
  if (chain.empty()) return refuse(bad(files.cert, "holds no PEM certificate"));
  auto key_bio = memory_bio(m.key_pem);
  pkey_ptr pkey(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_password, nullptr) : nullptr);
  ERR_clear_error();
  if (!pkey) return refuse(bad(files.key, "holds no unencrypted PEM private key"));
  if (X509_check_private_key(chain.front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return refuse(bad(files.key, "is not the key of the certificate in " + files.cert));
  }

  if (!files.client_ca.empty()) {
    auto ca = read_file(files.client_ca, false);
    if (!ca.error.empty()) return refuse({ca.error});
    if (certificates(ca.text).empty()) return refuse(bad(files.client_ca, "holds no PEM certificate"));
    m.client_ca_pem = std::move(ca.text);
  }

  bio_ptr text(BIO_new(BIO_s_mem()));
  if (text) {
    X509_NAME_print_ex(text.get(), X509_get_subject_name(chain.front().get()), 0, XN_FLAG_RFC2253);
    m.subject = text_of(text.get());
  }
  text.reset(BIO_new(BIO_s_mem()));
  if (text) {
    ASN1_TIME_print(text.get(), X509_get0_notAfter(chain.front().get()));
    m.not_after = text_of(text.get());
  }
  m.expired = X509_cmp_current_time(X509_get0_notAfter(chain.front().get())) < 0;
  ERR_clear_error();
  out = std::move(m);
  return true;
}

std::string describe(const tls_material& m, const tls_files& files) {
  std::string line = "TLS with " + (m.subject.empty() ? std::string("a certificate") : m.subject) + " (" +
                     (m.expired ? "EXPIRED " : "expires ") + m.not_after + ")";
  if (!m.client_ca_pem.empty()) line += ", clients need a certificate from " + files.client_ca;
  return line;
}

}  // namespace warm::net
