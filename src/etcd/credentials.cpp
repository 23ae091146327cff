// TLS credentials and etcd authentication tokens for warm's etcd client (credentials.hpp).
#include "etcd/credentials.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

namespace warm::etcd::detail {
namespace {

using steady = std::chrono::steady_clock;

// gRPC takes deadlines on the system clock; warm measures them on the steady one.
std::chrono::system_clock::time_point to_system(steady::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - steady::now());
}

// The PEM text of the file the option `name` gives, or invalid_argument naming both. The text
// is not checked beyond holding a PEM block: gRPC reads it when it first connects, and a
// certificate it cannot use fails the handshake (tls_failure).
expected<std::string> read_pem(const char* name, const std::string& path) {
  const std::string which = std::string("etcd ") + name + " '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    return make_error(errc::invalid_argument,
                      which + ": cannot read it" +
                          (error ? std::string(" (") + std::strerror(error) + ")" : std::string()));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(errc::invalid_argument, which + ": cannot read it");
  if (text.find("-----BEGIN ") == std::string::npos)
    return make_error(errc::invalid_argument, which + ": not a PEM file (no -----BEGIN line)");
  return text;
}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

expected<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const options& opts,
                                                                        bool tls) {
  if (!tls) {
    const char* given = !opts.ca_file.empty()     ? "ca_file"
                        : !opts.cert_file.empty() ? "cert_file"
                        : !opts.key_file.empty()  ? "key_file"
                                                  : nullptr;
    if (given)
      return make_error(errc::invalid_argument,
                        std::string("etcd ") + given +
                            " is given but the endpoints are http://: use https:// endpoints");
    return grpc::InsecureChannelCredentials();
  }
  if (opts.cert_file.empty() != opts.key_file.empty())
    return make_error(
        errc::invalid_argument,
        opts.cert_file.empty()
            ? "etcd key_file is given without cert_file: a client certificate needs both"
            : "etcd cert_file is given without key_file: a client certificate needs both");
  grpc::SslCredentialsOptions ssl;
  if (!opts.ca_file.empty()) {
    auto ca = read_pem("ca_file", opts.ca_file);
    if (!ca) return std::move(ca).error();
    ssl.pem_root_certs = std::move(*ca);
  }
  if (!opts.cert_file.empty()) {
    auto cert = read_pem("cert_file", opts.cert_file);
    if (!cert) return std::move(cert).error();
    auto key = read_pem("key_file", opts.key_file);
    if (!key) return std::move(key).error();
    ssl.pem_cert_chain = std::move(*cert);
    ssl.pem_private_key = std::move(*key);
  }
  return grpc::SslCredentials(ssl);
}

std::optional<std::string> tls_failure(const grpc::Status& s, bool tls) {
  if (!tls || s.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string m = lower(s.error_message());
  if (contains(m, "ssl") || contains(m, "tls") || contains(m, "handshake") ||
      contains(m, "certificate"))
    return "TLS handshake failed: " + s.error_message();
  if (contains(m, "failed to connect") && contains(m, "endpoint read failed"))
    return "TLS failed: etcd closed the connection after the handshake, before answering: it "
           "most likely refused the client certificate (none given, or one not signed by a CA "
           "it trusts) (" +
           s.error_message() + ")";
  return std::nullopt;
}

bool token_refused(const std::string& m) {
  return contains(m, "invalid auth token") || contains(m, "auth store is old") ||
         contains(m, "user name is empty");
}

// ---- authenticator ------------------------------------------------------------------------------

authenticator::authenticator(std::string user, std::string password)
    : user_(std::move(user)), password_(std::move(password)) {}

grpc::Status authenticator::get(::etcdserverpb::Auth::Stub& auth, steady::time_point until,
                                bool wait_for_ready, ticket* out) {
  auto current = [&] {
    std::lock_guard<std::mutex> lock(m_);
    if (!have_) return false;
    out->token = token_;
    out->generation = generation_;
    return true;
  };
  if (current()) return grpc::Status::OK;
  std::unique_lock<std::timed_mutex> fetching(fetching_, std::defer_lock);
  if (!fetching.try_lock_until(until))
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "no token in time (another call was authenticating)");
  if (current()) return grpc::Status::OK;  // that call got one
  ::etcdserverpb::AuthenticateResponse response;
  grpc::Status s;
  {
    ::etcdserverpb::AuthenticateRequest request;
    request.set_name(user_);
    request.set_password(password_);
    grpc::ClientContext ctx;
    ctx.set_deadline(to_system(until));
    ctx.set_wait_for_ready(wait_for_ready);
    s = auth.Authenticate(&ctx, request, &response);
  }
  // etcd with authentication off refuses Authenticate and takes calls without a token.
  const bool off = s.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
                   contains(s.error_message(), "authentication is not enabled");
  if (!s.ok() && !off) return s;
  std::lock_guard<std::mutex> lock(m_);
  have_ = true;
  token_ = off ? std::string() : response.token();
  ++generation_;
  out->token = token_;
  out->generation = generation_;
  return grpc::Status::OK;
}

void authenticator::drop(std::uint64_t generation) {
  std::lock_guard<std::mutex> lock(m_);
  if (have_ && generation_ == generation) {
    have_ = false;
    token_.clear();
  }
}

warm::error authentication_error(const authenticator& auth, const std::string& what,
                                 const std::string& endpoint, const grpc::Status& s) {
  const std::string user = "'" + auth.user() + "'";
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
      contains(s.error_message(), "authentication failed"))
    return make_error(errc::invalid_argument, "etcd refused user " + user +
                                                  ": authentication failed, wrong user name or " +
                                                  "password (etcd at " + endpoint + ": " +
                                                  s.error_message() + "; for " + what + ")");
  const bool refused = s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                       s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                       s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                       s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
  std::string message = "etcd " + what + ": authenticating as user " + user + " at " + endpoint +
                        ": " + s.error_message();
  if (!refused) message += " (gRPC code " + std::to_string(s.error_code()) + ")";
  return make_error(refused ? errc::invalid_argument : errc::internal, std::move(message));
}

}  // namespace warm::etcd::detail
