// What client.cpp and watch.cpp share: the helpers that turn gRPC's answers into warm's, and
// client::impl (the endpoints' channels, the one that answered last, the credentials). Internal
// to src/etcd; it includes gRPC.
#pragma once

#include "etcd/client.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "etcd.grpc.pb.h"
#include "etcd/credentials.hpp"

namespace warm::etcd {
namespace internal {

namespace pb = ::etcdserverpb;
using detail::authenticator;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// gRPC takes deadlines on the system clock; warm measures them on the steady one.
inline std::chrono::system_clock::time_point to_system(steady::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - steady::now());
}

// An attempt's deadline: an equal share of the time left for each of the `untried` endpoints.
inline steady::time_point share(steady::time_point now, steady::time_point deadline,
                                std::size_t untried) {
  if (untried <= 1) return deadline;
  return now + (deadline - now) / static_cast<long>(untried);
}

// A key for a message: quoted, non-printable bytes as \xNN, long keys cut.
inline std::string quoted(const std::string& key) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < key.size() && i < 80; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (key.size() > 80) out += "...";
  return out + "'";
}

// An endpoint as gRPC's target "host:port", and whether it is https.
struct target {
  std::string host_port;
  bool tls = false;
};

// "http://host:port", "https://host:port" or "host:port" (http) as a target.
inline expected<target> grpc_target(const std::string& endpoint) {
  std::string rest = endpoint;
  const std::string http = "http://", https = "https://";
  bool tls = false;
  if (rest.compare(0, http.size(), http) == 0) {
    rest.erase(0, http.size());
  } else if (rest.compare(0, https.size(), https) == 0) {
    rest.erase(0, https.size());
    tls = true;
  } else if (rest.find("://") != std::string::npos) {
    return make_error(errc::invalid_argument,
                      "etcd endpoint '" + endpoint + "': only http:// and https:// are supported");
  }
  while (!rest.empty() && rest.back() == '/')
    rest.pop_back();
  auto colon = rest.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < rest.size() &&
            colon + 6 >= rest.size();
  if (ok) {
    auto port = rest.substr(colon + 1);
    ok = port.find_first_not_of("0123456789") == std::string::npos && std::stoul(port) > 0 &&
         std::stoul(port) <= 65535;
    auto host = rest.substr(0, colon);
    if (ok && host.front() == '[')
      ok = host.size() > 2 && host.back() == ']';
    else if (ok)
      ok = host.find(':') == std::string::npos;  // an IPv6 address needs its brackets
    if (ok) ok = host.find_first_of("/ ") == std::string::npos;
  }
  if (!ok)
    return make_error(errc::invalid_argument,
                      "etcd endpoint '" + endpoint +
                          "': expected host:port, http://host:port or https://host:port");
  return target{rest, tls};
}

// etcd's "request timed out" family (UNAVAILABLE on the wire): the request reached etcd, which
// could not tell in time whether it was applied.
inline bool etcd_timed_out(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE &&
         s.error_message().find("etcdserver: request timed out") != std::string::npos;
}

// How a failed attempt ended, for the retry loop.
enum class failed {
  unreachable,  // never reached etcd (refused, not connected in time, no leader): try elsewhere
  late,         // sent but not answered in time, or etcd timed out applying it: outcome unknown
  final,        // etcd's answer to this request (invalid, not found, ...): no retry
};

inline failed classify(const grpc::Status& s, grpc::Channel& channel) {
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    // A request waits for a connection in the channel; if none is ready when its time is up, it
    // was not sent (a member that accepts connections and never completes the HTTP/2
    // handshake, one that is still starting, or an address that drops packets).
    return channel.GetState(false) == GRPC_CHANNEL_READY ? failed::late : failed::unreachable;
  if (etcd_timed_out(s)) return failed::late;
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return failed::unreachable;
  return failed::final;
}

// A gRPC status (not OK, not a failure to reach etcd) as warm's error.
inline warm::error status_error(const std::string& what, const std::string& endpoint,
                                const grpc::Status& s) {
  errc code = errc::internal;
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:  // a compacted or future revision
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      code = errc::invalid_argument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = errc::not_found;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = errc::capacity_exhausted;
      break;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::CANCELLED:
      code = errc::unavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = errc::timeout;
      break;
    default:
      break;
  }
  std::string message = "etcd " + what + " at " + endpoint + ": " + s.error_message();
  if (code == errc::internal) message += " (gRPC code " + std::to_string(s.error_code()) + ")";
  if (s.error_message().find("user name is empty") != std::string::npos)
    message += " (etcd has authentication on: give a user and password, or a client certificate)";
  return make_error(code, std::move(message));
}

inline key_value from_pb(const ::mvccpb::KeyValue& kv) {
  key_value out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

inline expected<void> check_key(const std::string& what, const std::string& key) {
  if (key.empty()) return make_error(errc::invalid_argument, "etcd " + what + ": the key is empty");
  return {};
}

// A prefix range: [key, range_end). The empty prefix is every key, from "\0" (etcd refuses an
// empty key) to the end.
inline void set_prefix(const std::string& prefix, std::string* key, std::string* range_end) {
  *key = prefix.empty() ? std::string(1, '\0') : prefix;
  *range_end = prefix_end(prefix);
}

// One member: its name as given, its channel and the stubs over it (all thread-safe).
struct endpoint {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Auth::Stub> auth;
};

// The error of a call that tried every endpoint until its deadline: timeout when some endpoint
// took the request and did not answer in time, unavailable when none could be reached.
inline warm::error gave_up(const std::string& what, const std::vector<std::string>& names,
                           const std::vector<std::string>& failures, bool answered_late,
                           milliseconds timeout) {
  std::string message = "etcd " + what + ": " +
                        (answered_late ? "no answer" : "no endpoint reachable") + " within " +
                        std::to_string(timeout.count()) + " ms (";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) message += "; ";
    message += names[i] + ": " + (failures[i].empty() ? "not tried" : failures[i]);
  }
  message += ")";
  return make_error(answered_late ? errc::timeout : errc::unavailable, std::move(message));
}

// The error of a call whose TLS handshake failed at every endpoint (client.hpp's contract 7).
inline warm::error tls_failed(const std::string& what, const std::vector<std::string>& names,
                              const std::vector<std::string>& failures) {
  std::string message = "etcd " + what + ": TLS failed with every endpoint (";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) message += "; ";
    message += names[i] + ": " + failures[i];
  }
  message += "): check the CA, client certificate and key against etcd's certificates";
  return make_error(errc::unavailable, std::move(message));
}

// A channel that failed to connect waits out gRPC's backoff before it tries again; a call that
// still has time asks for the next attempt at once (its own pauses pace the attempts). Then a
// member that comes back is used by the next round of the call, not up to a second later.
inline void reconnect_now(grpc::Channel& channel) {
  if (channel.GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE)
    grpc::experimental::ChannelResetConnectionBackoff(&channel);
}

// Whether a request may be sent again after it may have reached etcd.
enum class repeatable { yes, no };

// The pause after a round of endpoints none of which could be reached.
constexpr milliseconds first_pause{50}, last_pause{500};

}  // namespace internal

using namespace internal;

// ---- client::impl -------------------------------------------------------------------------------

struct client::impl {
  options opts;
  std::vector<endpoint> endpoints;
  std::atomic<std::size_t> preferred{0};  // the endpoint that answered last
  // With options::user: the token, shared with the watches (which may outlive the client).
  std::shared_ptr<authenticator> auth;
  bool tls = false;  // the endpoints are https

  // Moves `preferred` on from `failed` (unless another call moved it already).
  void skip(std::size_t failed) {
    std::size_t expect = failed;
    preferred.compare_exchange_strong(expect, (failed + 1) % endpoints.size());
  }

  // Runs `attempt(endpoint&, ClientContext&) -> grpc::Status` against the endpoints until one
  // answers or `deadline` passes, as client.hpp's contracts 3, 7 and 8 say. `what` names the
  // operation for messages. The context an attempt gets carries the token, when there is one.
  template <class Attempt>
  expected<void> invoke(const std::string& what, repeatable again, steady::time_point deadline,
                        Attempt&& attempt) {
    const std::size_t n = endpoints.size();
    std::vector<std::string> failures(n);  // the last failure seen at each endpoint
    std::vector<bool> tls_refused(n);      // its TLS handshake failed: not tried again
    std::size_t tls_refusals = 0;
    bool answered_late = false;  // some endpoint took the request and did not answer in time
    bool renewed = false;        // a token etcd refused was replaced once already
    milliseconds pause = first_pause;
    for (int round = 0;; ++round) {
      const std::size_t first = preferred.load();
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = (first + i) % n;
        if (tls_refused[at]) continue;
        const auto now = steady::now();
        if (now >= deadline) return gave_up(what, failures, answered_late);
        const auto until = share(now, deadline, n - i);
        grpc::Status s;
        bool authenticating = false;  // s is Authenticate's failure: the request was not sent
        for (;;) {                    // once, or twice when etcd refused the token
          grpc::ClientContext ctx;
          ctx.set_deadline(to_system(until));
          // The first round fails fast on an endpoint that is known to be down, so that the call
          // moves on at once; later rounds wait for a connection within their share. (A request
          // that fails fast polls nothing, so gRPC would not even notice a connection
          // completing.)
          ctx.set_wait_for_ready(round > 0);
          authenticator::ticket ticket;
          if (auth) s = auth->get(*endpoints[at].auth, until, round > 0, &ticket);
          authenticating = !s.ok();
          if (authenticating) break;
          if (!ticket.token.empty()) ctx.AddMetadata("token", ticket.token);
          s = attempt(endpoints[at], ctx);
          if (s.ok() || !auth || renewed || !detail::token_refused(s.error_message())) break;
          renewed = true;
          auth->drop(ticket.generation);
        }
        if (s.ok()) {
          preferred.store(at);
          return {};
        }
        if (auto why = detail::tls_failure(s, tls)) {
          tls_refused[at] = true;
          failures[at] = std::move(*why);
          skip(at);
          if (++tls_refusals == n) return tls_failed(what, names(), failures);
          continue;
        }
        failed how = classify(s, *endpoints[at].channel);
        if (authenticating && how == failed::final)
          return detail::authentication_error(*auth, what, endpoints[at].name, s);
        if (authenticating) how = failed::unreachable;  // the request itself was not sent
        if (how == failed::final) return status_error(what, endpoints[at].name, s);
        skip(at);
        if (how == failed::late && again == repeatable::no)
          return make_error(errc::timeout, "etcd " + what + " at " + endpoints[at].name +
                                               ": no answer in time, the write may or may not "
                                               "have been applied (" +
                                               s.error_message() + ")");
        answered_late = answered_late || how == failed::late;
        if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
          failures[at] = s.error_message();
        else if (how == failed::late || failures[at].empty())
          failures[at] = how == failed::late ? "no answer in time" : "no connection in time";
      }
      const auto now = steady::now();
      if (now >= deadline) return gave_up(what, failures, answered_late);
      std::this_thread::sleep_for(std::min<steady::duration>(pause, deadline - now));
      pause = std::min(pause * 2, last_pause);
      for (auto& e : endpoints)
        reconnect_now(*e.channel);
    }
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : endpoints)
      out.push_back(e.name);
    return out;
  }

  warm::error gave_up(const std::string& what, const std::vector<std::string>& failures,
                      bool answered_late) const {
    return etcd::gave_up(what, names(), failures, answered_late, opts.timeout);
  }

  steady::time_point deadline() const { return steady::now() + opts.timeout; }
};

}  // namespace warm::etcd
