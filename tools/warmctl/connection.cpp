#include "connection.hpp"

#include <fstream>
#include <sstream>

#include <capnp/rpc.h>

#include "rpc/tls_context.hpp"

namespace warm::ctl {
namespace {

std::string describe(const kj::Exception& e) {
  return std::string(e.getDescription().cStr());
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw connection_error("cannot read token file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  auto first = token.find_first_not_of(" \t\r\n");
  auto last = token.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) throw connection_error("token file '" + path + "' is empty");
  return token.substr(first, last - first + 1);
}

std::string read_pem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) throw connection_error(std::string("cannot read ") + flag + " file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The host of "HOST:PORT" ("[::1]:PORT": ::1): the name a server's certificate must carry.
std::string host_of(const std::string& address) {
  auto colon = address.rfind(':');
  auto host = address.substr(0, colon == std::string::npos ? address.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host;
}

// The TLS context `options` ask for (its files read here).
std::shared_ptr<warm::rpc::tls_client> client_tls(const connect_options& options) {
  if (options.tls_cert.empty() != options.tls_key.empty())
    throw connection_error("--tls-cert and --tls-key go together");
  warm::rpc::tls_client_options o;
  if (!options.tls_ca.empty()) o.ca_pem = read_pem(options.tls_ca, "--tls-ca");
  if (!options.tls_cert.empty()) {
    o.cert_pem = read_pem(options.tls_cert, "--tls-cert");
    o.key_pem = read_pem(options.tls_key, "--tls-key");
  }
  try {
    return warm::rpc::make_tls_client(o);
  } catch (const kj::Exception& e) {
    throw connection_error("TLS: " + describe(e));
  }
}

// The status code's name as warmctl prints it ("unauthenticated", ...).
std::string auth_failure(warm::rpc::Status::Reader status) {
  return std::string(status.getMessage().cStr());
}

}  // namespace

connection::connection(kj::Own<kj::AsyncIoStream> stream, std::string address)
    : address_(std::move(address)), stream_(kj::mv(stream)), warm_(nullptr) {
  // The client trusts its server: allow large inference results (the default stops at 64 MiB).
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::uint64_t{1} << 31;
  network_ =
      kj::heap<capnp::TwoPartyVatNetwork>(*stream_, capnp::rpc::twoparty::Side::CLIENT, options);
  rpc_ = kj::heap(capnp::makeRpcClient(*network_));
  watch_ = network_->onDisconnect().then([this] { lost_ = true; }).eagerlyEvaluate(nullptr);
}

std::unique_ptr<connection> connection::open(kj::AsyncIoContext& io,
                                             const connect_options& options) {
  const std::string& addr = options.address;
  auto& timer = io.provider->getTimer();
  // One deadline for every step, read from the monotonic clock itself: the timer's now() is the
  // time the event loop last waited, which stands still while the REPL sits at its prompt, so a
  // deadline taken from it would be long gone after a pause at the prompt. (The timer follows this
  // clock: it fires once the loop sees the clock past the deadline.)
  const kj::TimePoint deadline =
      kj::systemPreciseMonotonicClock().now() + options.timeout.count() * kj::MILLISECONDS;
  // A timeout is OVERLOADED ("operation timed out"): say how long was waited.
  auto why = [&](const kj::Exception& e) {
    return e.getType() == kj::Exception::Type::OVERLOADED
               ? "no answer within " + std::to_string(options.timeout.count()) +
                     " ms (--connect-timeout)"
               : describe(e);
  };
  std::unique_ptr<connection> conn;
  const bool tls = options.uses_tls();
  if (tls && addr.rfind("unix:", 0) == 0)
    throw connection_error("TLS is for HOST:PORT addresses; " + addr + " is a unix socket");
  auto context = tls ? client_tls(options) : nullptr;
  try {
    auto address =
        timer.timeoutAt(deadline, io.provider->getNetwork().parseAddress(addr)).wait(io.waitScope);
    auto stream = timer.timeoutAt(deadline, address->connect()).wait(io.waitScope);
    if (context) {
      auto name = options.tls_server_name.empty() ? host_of(addr) : options.tls_server_name;
      stream = timer.timeoutAt(deadline, context->context->wrapClient(kj::mv(stream), name))
                   .wait(io.waitScope)
                   .attach(kj::mv(context));
    }
    conn = std::make_unique<connection>(kj::mv(stream), addr);
  } catch (const kj::Exception& e) {
    throw connection_error("cannot connect to " + addr + " (is warmd running?): " + why(e));
  }
  capnp::MallocMessageBuilder vat_id;
  auto id = vat_id.initRoot<capnp::rpc::twoparty::VatId>();
  id.setSide(capnp::rpc::twoparty::Side::SERVER);
  auto bootstrap = conn->rpc_->bootstrap(id);
  if (options.token_file.empty()) {
    try {  // the server's answer to the bootstrap: it serves this connection
      timer.timeoutAt(deadline, bootstrap.whenResolved()).wait(io.waitScope);
    } catch (const kj::Exception& e) {
      throw connection_error("cannot connect to " + addr + " (is warmd running?): " + why(e));
    }
    conn->warm_ = bootstrap.castAs<warm::rpc::Warm>();
    return conn;
  }
  std::string token = read_token(options.token_file);
  auto request = bootstrap.castAs<warm::rpc::Authenticator>().authenticateRequest();
  request.setToken(token);
  try {
    auto reply = timer.timeoutAt(deadline, request.send()).wait(io.waitScope);
    if (reply.getStatus().getCode() != warm::rpc::Status::Code::OK)
      throw connection_error("authentication with " + addr +
                             " failed: " + auth_failure(reply.getStatus()));
    conn->warm_ = reply.getWarm();
  } catch (const kj::Exception& e) {
    if (e.getType() == kj::Exception::Type::UNIMPLEMENTED)
      throw connection_error(
          addr + " asks for no token (its bootstrap is not Authenticator): drop --token-file");
    throw connection_error("authentication with " + addr + " failed: " + why(e));
  }
  return conn;
}

session::session() : io_(kj::setupAsyncIo()) {}

connection& session::connect(const connect_options& options) {
  if (conn_) io_.waitScope.poll();  // a close by the server since the last command shows now
  if (conn_ && (conn_->lost() || !options.same_endpoint(options_))) conn_.reset();
  if (!conn_) {
    conn_ = connection::open(io_, options);
    options_ = options;
  }
  return *conn_;
}

connection_error session::transport_failure(const kj::Exception& e) {
  // The caller still holds requests on this connection: it calls drop() once they are gone.
  std::string where = conn_ ? conn_->address() : options_.address;
  if (e.getType() == kj::Exception::Type::DISCONNECTED)
    return connection_error("connection to " + where + " lost: " + describe(e));
  if (e.getType() == kj::Exception::Type::UNIMPLEMENTED && options_.token_file.empty())
    return connection_error("call to " + where +
                            " failed (a remote listener needs --token-file): " + describe(e));
  return connection_error("call to " + where + " failed: " + describe(e));
}

}  // namespace warm::ctl
