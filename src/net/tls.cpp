#include "net/tls.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "net/pem.hpp"

namespace warm::net {

namespace {

// What a failed read or check says.
struct failure {
  std::string message;
};

failure bad(const std::string& file, const std::string& what) {
  return {"TLS: " + file + ": " + what};
}

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

  auto chain = pem_certificates(m.cert_pem);
  if (chain.empty()) return refuse(bad(files.cert, "holds no PEM certificate"));
  auto pkey = pem_private_key(m.key_pem);
  if (!pkey) return refuse(bad(files.key, "holds no unencrypted PEM private key"));
  if (X509_check_private_key(chain.front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return refuse(bad(files.key, "is not the key of the certificate in " + files.cert));
  }

  if (!files.client_ca.empty()) {
    auto ca = read_file(files.client_ca, false);
    if (!ca.error.empty()) return refuse({ca.error});
    if (pem_certificates(ca.text).empty())
      return refuse(bad(files.client_ca, "holds no PEM certificate"));
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
  std::string line = "TLS with " + (m.subject.empty() ? std::string("a certificate") : m.subject) +
                     " (" + (m.expired ? "EXPIRED " : "expires ") + m.not_after + ")";
  if (!m.client_ca_pem.empty()) line += ", clients need a certificate from " + files.client_ca;
  return line;
}

}  // namespace warm::net
