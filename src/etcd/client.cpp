// warm::etcd::client over etcd's v3 gRPC API (client.hpp has the contracts). The only translation
// unit of src/etcd that includes gRPC, besides the generated code.
//
// Unary calls use gRPC's synchronous API, one ClientContext per attempt with the attempt's
// deadline. LeaseKeepAlive is a short synchronous stream under the call's deadline. A watch runs
// gRPC's asynchronous API on its own thread and completion queue, so that waiting for etcd's
// confirmation is bounded by a deadline and the destructor can cancel a read at any time. TLS and
// etcd's tokens come from credentials.hpp: every attempt (a watch's too) first takes the current
// token, and a call whose token etcd refused drops it and is tried once more.
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
namespace {

namespace pb = ::etcdserverpb;
using detail::authenticator;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// gRPC takes deadlines on the system clock; warm measures them on the steady one.
std::chrono::system_clock::time_point to_system(steady::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - steady::now());
}

// An attempt's deadline: an equal share of the time left for each of the `untried` endpoints.
steady::time_point share(steady::time_point now, steady::time_point deadline, std::size_t untried) {
  if (untried <= 1) return deadline;
  return now + (deadline - now) / static_cast<long>(untried);
}

// A key for a message: quoted, non-printable bytes as \xNN, long keys cut.
std::string quoted(const std::string& key) {
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
expected<target> grpc_target(const std::string& endpoint) {
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
bool etcd_timed_out(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE &&
         s.error_message().find("etcdserver: request timed out") != std::string::npos;
}

// How a failed attempt ended, for the retry loop.
enum class failed {
  unreachable,  // never reached etcd (refused, not connected in time, no leader): try elsewhere
  late,         // sent but not answered in time, or etcd timed out applying it: outcome unknown
  final,        // etcd's answer to this request (invalid, not found, ...): no retry
};

failed classify(const grpc::Status& s, grpc::Channel& channel) {
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
warm::error status_error(const std::string& what, const std::string& endpoint,
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

key_value from_pb(const ::mvccpb::KeyValue& kv) {
  key_value out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

expected<void> check_key(const std::string& what, const std::string& key) {
  if (key.empty()) return make_error(errc::invalid_argument, "etcd " + what + ": the key is empty");
  return {};
}

// A prefix range: [key, range_end). The empty prefix is every key, from "\0" (etcd refuses an
// empty key) to the end.
void set_prefix(const std::string& prefix, std::string* key, std::string* range_end) {
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
warm::error gave_up(const std::string& what, const std::vector<std::string>& names,
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
warm::error tls_failed(const std::string& what, const std::vector<std::string>& names,
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
void reconnect_now(grpc::Channel& channel) {
  if (channel.GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE)
    grpc::experimental::ChannelResetConnectionBackoff(&channel);
}

// Whether a request may be sent again after it may have reached etcd.
enum class repeatable { yes, no };

// The pause after a round of endpoints none of which could be reached.
constexpr milliseconds first_pause{50}, last_pause{500};

}  // namespace

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

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

client::client(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
client::~client() = default;

expected<std::unique_ptr<client>> client::connect(options opts) {
  if (opts.endpoints.empty()) return make_error(errc::invalid_argument, "etcd: no endpoints given");
  if (opts.timeout.count() <= 0)
    return make_error(errc::invalid_argument, "etcd: the timeout must be positive");
  if (opts.keepalive < milliseconds(5000))
    return make_error(errc::invalid_argument,
                      "etcd: the keepalive interval must be at least 5000 ms (etcd refuses "
                      "pings more often)");
  if (opts.page_size <= 0)
    return make_error(errc::invalid_argument, "etcd: the page size must be positive");
  std::vector<target> targets;
  for (const auto& name : opts.endpoints) {
    auto t = grpc_target(name);
    if (!t) return std::move(t).error();
    if (!targets.empty() && t->tls != targets.front().tls)
      return make_error(errc::invalid_argument,
                        "etcd endpoints '" + opts.endpoints.front() + "' and '" + name +
                            "': all endpoints must be http:// or all https://");
    targets.push_back(std::move(*t));
  }
  if (opts.user.empty() != opts.password.empty())
    return make_error(errc::invalid_argument,
                      opts.user.empty()
                          ? "etcd: a password is given without a user"
                          : "etcd: user '" + opts.user + "' is given without a password");
  auto credentials = detail::channel_credentials(opts, targets.front().tls);
  if (!credentials) return std::move(credentials).error();
  auto state = std::make_unique<impl>();
  if (!opts.user.empty()) state->auth = std::make_shared<authenticator>(opts.user, opts.password);
  state->tls = targets.front().tls;
  const int timeout_ms = static_cast<int>(std::min<long long>(opts.timeout.count(), 1 << 30));
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& name = opts.endpoints[i];
    grpc::ChannelArguments args;
    // Each client has its own connections: one client's backoff never delays another's calls.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // Reconnect soon after a member comes back (gRPC's default backoff grows to 120 s), and give
    // up a connection attempt after half the call timeout (gRPC's default: 20 s), so that a call
    // has time for a second attempt when the first met a member still starting (etcd accepts
    // connections before it serves them) or one that hangs.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, std::max(100, timeout_ms / 2));
    // Pings while a call or watch is open, never without one (etcd's enforcement policy), and
    // without gRPC's limit of two pings between data frames (an idle watch sends none).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                static_cast<int>(std::min<long long>(opts.keepalive.count(), 1 << 30)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, timeout_ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // A large listing is paged, but one page of large values may still pass gRPC's 4 MiB.
    args.SetMaxReceiveMessageSize(-1);
    endpoint e;
    e.name = name;
    e.channel = grpc::CreateCustomChannel(targets[i].host_port, *credentials, args);
    e.kv = pb::KV::NewStub(e.channel);
    e.lease = pb::Lease::NewStub(e.channel);
    e.auth = pb::Auth::NewStub(e.channel);
    state->endpoints.push_back(std::move(e));
  }
  opts.password.clear();  // kept by the authenticator only
  state->opts = std::move(opts);
  return std::unique_ptr<client>(new client(std::move(state)));
}

const std::vector<std::string>& client::endpoints() const {
  return impl_->opts.endpoints;
}

// ---- keys ---------------------------------------------------------------------------------------

expected<std::optional<key_value>> client::get(const std::string& key) {
  const std::string what = "get " + quoted(key);
  if (auto ok = check_key("get", key); !ok) return std::move(ok).error();
  pb::RangeRequest req;
  req.set_key(key);
  pb::RangeResponse resp;
  auto r = impl_->invoke(what, repeatable::yes, impl_->deadline(),
                         [&](endpoint& e, grpc::ClientContext& ctx) {
                           resp.Clear();
                           return e.kv->Range(&ctx, req, &resp);
                         });
  if (!r) return std::move(r).error();
  if (resp.kvs_size() == 0) return std::optional<key_value>();
  return std::optional<key_value>(from_pb(resp.kvs(0)));
}

expected<range_result> client::get_prefix(const std::string& prefix) {
  const std::string what = "get prefix " + quoted(prefix);
  const auto deadline = impl_->deadline();
  std::string first, end;
  set_prefix(prefix, &first, &end);
  // Pages at the first page's revision. A compaction past that revision between two pages (etcd
  // answers OUT_OF_RANGE, invalid_argument here) starts the listing again, once.
  for (int pass = 0;; ++pass) {
    range_result out;
    pb::RangeRequest req;
    req.set_key(first);
    req.set_range_end(end);
    req.set_limit(impl_->opts.page_size);
    pb::RangeResponse resp;
    bool compacted = false;
    for (;;) {
      auto r = impl_->invoke(what, repeatable::yes, deadline,
                             [&](endpoint& e, grpc::ClientContext& ctx) {
                               resp.Clear();
                               return e.kv->Range(&ctx, req, &resp);
                             });
      if (!r) {
        if (pass == 0 && out.revision != 0 && r.error().code == errc::invalid_argument) {
          compacted = true;
          break;
        }
        return std::move(r).error();
      }
      if (out.revision == 0) {
        out.revision = resp.header().revision();
        req.set_revision(out.revision);
      }
      for (const auto& kv : resp.kvs())
        out.kvs.push_back(from_pb(kv));
      if (!resp.more() || resp.kvs_size() == 0) return out;
      req.set_key(resp.kvs(resp.kvs_size() - 1).key() + '\0');  // just after the last key read
    }
    if (!compacted) return out;
  }
}

expected<std::int64_t> client::put(const std::string& key, const std::string& value,
                                   lease_id lease) {
  const std::string what = "put " + quoted(key);
  if (auto ok = check_key("put", key); !ok) return std::move(ok).error();
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  auto r = impl_->invoke(what, repeatable::no, impl_->deadline(),
                         [&](endpoint& e, grpc::ClientContext& ctx) {
                           resp.Clear();
                           return e.kv->Put(&ctx, req, &resp);
                         });
  if (!r) return std::move(r).error();
  return resp.header().revision();
}

namespace {

expected<erase_result> delete_range(client::impl& c, const std::string& what,
                                    const std::string& key, const std::string& range_end) {
  pb::DeleteRangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  pb::DeleteRangeResponse resp;
  auto r = c.invoke(what, repeatable::no, c.deadline(), [&](endpoint& e, grpc::ClientContext& ctx) {
    resp.Clear();
    return e.kv->DeleteRange(&ctx, req, &resp);
  });
  if (!r) return std::move(r).error();
  return erase_result{resp.deleted(), resp.header().revision()};
}

}  // namespace

expected<erase_result> client::erase(const std::string& key) {
  if (auto ok = check_key("erase", key); !ok) return std::move(ok).error();
  return delete_range(*impl_, "erase " + quoted(key), key, "");
}

expected<erase_result> client::erase_prefix(const std::string& prefix) {
  if (prefix.empty())
    return make_error(errc::invalid_argument, "etcd erase prefix: the prefix is empty");
  return delete_range(*impl_, "erase prefix " + quoted(prefix), prefix, prefix_end(prefix));
}

namespace {

// One transaction (client::transact's contract); `what` names it in errors.
expected<txn_result> run_txn(client::impl& self, const std::string& what,
                             const std::vector<txn_condition>& conditions,
                             const std::vector<txn_write>& writes) {
  if (conditions.size() > client::max_txn_operations || writes.size() > client::max_txn_operations)
    return make_error(errc::invalid_argument, "etcd transaction: more than " +
                                                  std::to_string(client::max_txn_operations) +
                                                  " conditions or writes");
  pb::TxnRequest req;
  for (const auto& c : conditions) {
    if (auto ok = check_key("transaction", c.key); !ok) return std::move(ok).error();
    if (c.mod_revision < 0)
      return make_error(errc::invalid_argument, "etcd transaction " + quoted(c.key) +
                                                    ": the expected revision is negative");
    auto* cmp = req.add_compare();
    cmp->set_key(c.key);
    cmp->set_result(pb::Compare::EQUAL);
    // As put_if: a creation revision of 0 says the key does not exist.
    if (c.mod_revision == 0) {
      cmp->set_target(pb::Compare::CREATE);
      cmp->set_create_revision(0);
    } else {
      cmp->set_target(pb::Compare::MOD);
      cmp->set_mod_revision(c.mod_revision);
    }
    req.add_failure()->mutable_request_range()->set_key(c.key);
  }
  std::set<std::string> written;
  for (const auto& w : writes) {
    if (auto ok = check_key("transaction", w.key); !ok) return std::move(ok).error();
    if (!written.insert(w.key).second)
      return make_error(errc::invalid_argument,
                        "etcd transaction: key " + quoted(w.key) + " is written twice");
    auto* op = req.add_success();
    if (w.value) {
      op->mutable_request_put()->set_key(w.key);
      op->mutable_request_put()->set_value(*w.value);
      op->mutable_request_put()->set_lease(w.lease);
    } else {
      op->mutable_request_delete_range()->set_key(w.key);
    }
  }
  pb::TxnResponse resp;
  auto r = self.invoke(what, repeatable::no, self.deadline(),
                       [&](endpoint& e, grpc::ClientContext& ctx) {
                         resp.Clear();
                         return e.kv->Txn(&ctx, req, &resp);
                       });
  if (!r) return std::move(r).error();
  txn_result out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  if (!out.succeeded)
    for (const auto& response : resp.responses()) {
      const auto& range = response.response_range();
      out.current.push_back(range.kvs_size() > 0 ? std::optional<key_value>(from_pb(range.kvs(0)))
                                                 : std::nullopt);
    }
  return out;
}

// A one-key transaction's outcome as a compare-and-set's.
expected<cas_result> one_key(expected<txn_result> t) {
  if (!t) return std::move(t).error();
  cas_result out;
  out.succeeded = t->succeeded;
  out.revision = t->revision;
  if (!t->succeeded && !t->current.empty()) out.current = std::move(t->current.front());
  return out;
}

}  // namespace

expected<txn_result> client::transact(const std::vector<txn_condition>& conditions,
                                      const std::vector<txn_write>& writes) {
  return run_txn(*impl_, "transaction", conditions, writes);
}

// ---- compare-and-set ----------------------------------------------------------------------------

expected<cas_result> client::put_if(const std::string& key, const std::string& value,
                                    std::int64_t expected_mod_revision, lease_id lease) {
  if (auto ok = check_key("put_if", key); !ok) return std::move(ok).error();
  if (expected_mod_revision < 0)
    return make_error(errc::invalid_argument,
                      "etcd put_if " + quoted(key) + ": the expected revision is negative");
  return one_key(run_txn(*impl_, "put_if " + quoted(key), {{key, expected_mod_revision}},
                         {{key, value, lease}}));
}

expected<cas_result> client::erase_if(const std::string& key, std::int64_t expected_mod_revision) {
  if (auto ok = check_key("erase_if", key); !ok) return std::move(ok).error();
  if (expected_mod_revision <= 0)
    return make_error(errc::invalid_argument,
                      "etcd erase_if " + quoted(key) + ": the expected revision must be positive");
  return one_key(run_txn(*impl_, "erase_if " + quoted(key), {{key, expected_mod_revision}},
                         {{key, std::nullopt}}));
}

// ---- leases -------------------------------------------------------------------------------------

expected<lease> client::grant_lease(std::int64_t ttl_seconds) {
  if (ttl_seconds <= 0)
    return make_error(errc::invalid_argument, "etcd grant lease: the TTL must be positive");
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse resp;
  auto r = impl_->invoke("grant lease", repeatable::no, impl_->deadline(),
                         [&](endpoint& e, grpc::ClientContext& ctx) {
                           resp.Clear();
                           return e.lease->LeaseGrant(&ctx, req, &resp);
                         });
  if (!r) return std::move(r).error();
  if (!resp.error().empty()) return make_error(errc::internal, "etcd grant lease: " + resp.error());
  return lease{resp.id(), resp.ttl()};
}

expected<void> client::revoke_lease(lease_id id) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  return impl_->invoke("revoke lease " + std::to_string(id), repeatable::no, impl_->deadline(),
                       [&](endpoint& e, grpc::ClientContext& ctx) {
                         return e.lease->LeaseRevoke(&ctx, req, &resp);
                       });
}

expected<std::int64_t> client::keep_alive_once(lease_id id) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  pb::LeaseKeepAliveResponse resp;
  // A renewal may be repeated: it only moves the expiry.
  auto r = impl_->invoke(
      "keep lease " + std::to_string(id) + " alive", repeatable::yes, impl_->deadline(),
      [&](endpoint& e, grpc::ClientContext& ctx) {
        auto stream = e.lease->LeaseKeepAlive(&ctx);
        resp.Clear();
        bool answered = stream->Write(req) && stream->WritesDone() && stream->Read(&resp);
        grpc::Status s = stream->Finish();  // etcd ends the stream once it has our WritesDone
        if (s.ok() && !answered)
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream closed without an answer");
        return s;
      });
  if (!r) return std::move(r).error();
  return std::max<std::int64_t>(resp.ttl(), 0);
}

expected<std::int64_t> client::time_to_live(lease_id id) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  pb::LeaseTimeToLiveResponse resp;
  auto r = impl_->invoke("lease " + std::to_string(id) + " time to live", repeatable::yes,
                         impl_->deadline(), [&](endpoint& e, grpc::ClientContext& ctx) {
                           resp.Clear();
                           return e.lease->LeaseTimeToLive(&ctx, req, &resp);
                         });
  if (!r) return std::move(r).error();
  return std::max<std::int64_t>(resp.ttl(), 0);  // etcd says -1 for an unknown lease
}

// ---- watch --------------------------------------------------------------------------------------

// A watch's state, shared by the watcher and its thread (which holds it alive while it runs, so
// that a watcher destroyed from its own callback can let the thread finish alone).
struct watcher::impl {
  // Set by client::watch before the thread starts; read-only afterwards.
  struct member {
    std::string name;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Watch::Stub> stub;
    std::unique_ptr<pb::Auth::Stub> auth;
  };
  std::vector<member> members;
  std::size_t first = 0;                // the client's preferred endpoint when the watch began
  std::shared_ptr<authenticator> auth;  // the client's, with options::user
  bool tls = false;                     // the endpoints are https
  pb::WatchCreateRequest create;
  std::string what;  // "watch 'prefix'", for messages
  milliseconds timeout{0};
  watch_callback callback;
  std::promise<expected<void>> confirmed;  // set once: the watch is confirmed, or given up

  std::thread thread;
  std::atomic<bool> ended{false};

  // The destructor's signal: `stopping` set and the open call (if any) cancelled, under `m`.
  std::mutex m;
  bool stopping = false;
  grpc::ClientContext* open = nullptr;

  // The thread: confirms the watch (or gives up), then reads the stream until it ends.
  void run();
  // Called by the watcher's destructor.
  void stop();

 private:
  using stream_t = grpc::ClientAsyncReaderWriter<pb::WatchRequest, pb::WatchResponse>;
  enum tag : std::intptr_t { start_tag = 1, write_tag, read_tag, finish_tag };

  // One Watch call on the thread's completion queue, and which of its operations are in flight.
  struct call {
    grpc::ClientContext ctx;
    std::unique_ptr<stream_t> stream;
    bool starting = false, writing = false, reading = false;
    pb::WatchResponse response;
    bool busy() const { return starting || writing || reading; }
  };

  // How opening a watch ended: confirmed; not reached; sent and not confirmed in time; refused
  // by etcd; refused for what may be its token (a fresh one may do); its TLS handshake failed.
  enum class outcome { confirmed, unreachable, late, refused, token_refused, tls };

  bool is_stopping() {
    std::lock_guard<std::mutex> lock(m);
    return stopping;
  }
  void set_open(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(m);
    open = ctx;
  }
  // The next completion on `cq` (of `c`'s operations) before `until` (steady::time_point::max():
  // no limit); false when `until` passed first.
  bool next(grpc::CompletionQueue& cq, call& c, steady::time_point until, tag* t, bool* ok);
  // Ends `c`: cancels it unless it failed already, waits for its operations, returns its status.
  grpc::Status finish(grpc::CompletionQueue& cq, call& c, bool cancel);
  // Opens a call on `at` with `token` (none when empty), sends the create request and waits
  // (until `until`) for etcd to confirm it. `confirmed`: the call is open; otherwise it is
  // finished, with `failure` (unreachable, late, tls) or `refusal` (refused, token_refused)
  // saying why.
  outcome open_call(grpc::CompletionQueue& cq, call& c, const member& at, steady::time_point until,
                    bool wait_for_ready, const std::string& token, std::string* failure,
                    warm::error* refusal);
  // One try at `at`: gets a token when the watch needs one, opens the call and, once it is
  // confirmed, reads it to its end. What it found is added to the arguments; given_up is set
  // when there is nothing more to try.
  void attempt(grpc::CompletionQueue& cq, std::size_t at, steady::time_point until, bool wait,
               std::optional<expected<void>>* given_up, bool* answered_late, bool* failed_tls,
               std::string* failure);
  // Reads the confirmed call until it ends, delivering updates; the last one has an error unless
  // the watcher is being destroyed.
  void read(grpc::CompletionQueue& cq, call& c, const member& at);
  void deliver_end(errc code, std::string message, std::int64_t compact_revision);
};

bool watcher::impl::next(grpc::CompletionQueue& cq, call& c, steady::time_point until, tag* t,
                         bool* ok) {
  void* got = nullptr;
  if (until == steady::time_point::max()) {
    if (!cq.Next(&got, ok)) return false;  // not before the thread shuts the queue down
  } else if (cq.AsyncNext(&got, ok, to_system(until)) != grpc::CompletionQueue::GOT_EVENT) {
    return false;
  }
  *t = static_cast<tag>(reinterpret_cast<std::intptr_t>(got));
  if (*t == start_tag) c.starting = false;
  if (*t == write_tag) c.writing = false;
  if (*t == read_tag) c.reading = false;
  return true;
}

grpc::Status watcher::impl::finish(grpc::CompletionQueue& cq, call& c, bool cancel) {
  if (cancel) c.ctx.TryCancel();
  tag t = start_tag;
  bool ok = false;
  while (c.busy())
    next(cq, c, steady::time_point::max(), &t, &ok);
  grpc::Status status;
  c.stream->Finish(&status, reinterpret_cast<void*>(finish_tag));
  do {
    next(cq, c, steady::time_point::max(), &t, &ok);
  } while (t != finish_tag);
  set_open(nullptr);
  return status;
}

watcher::impl::outcome watcher::impl::open_call(grpc::CompletionQueue& cq, call& c,
                                                const member& at, steady::time_point until,
                                                bool wait_for_ready, const std::string& token,
                                                std::string* failure, warm::error* refusal) {
  // With this, etcd ends the stream when its member loses the leader, instead of leaving it
  // silent while the rest of the cluster goes on.
  c.ctx.AddMetadata("hasleader", "true");
  if (!token.empty()) c.ctx.AddMetadata("token", token);
  c.ctx.set_wait_for_ready(wait_for_ready);  // as in client::impl::invoke
  set_open(&c.ctx);
  c.stream = at.stub->PrepareAsyncWatch(&c.ctx, &cq);
  c.stream->StartCall(reinterpret_cast<void*>(start_tag));
  c.starting = true;
  for (;;) {
    tag t = start_tag;
    bool ok = false;
    if (!next(cq, c, until, &t, &ok)) {
      finish(cq, c, true);
      if (at.channel->GetState(false) != GRPC_CHANNEL_READY) {
        if (failure->empty()) *failure = "no connection in time";
        return outcome::unreachable;
      }
      *failure = "no confirmation in time";
      return outcome::late;
    }
    if (!ok) {  // the call failed; its status says why
      auto s = finish(cq, c, false);
      if (auto why = detail::tls_failure(s, tls)) {
        *failure = std::move(*why);
        return outcome::tls;
      }
      switch (classify(s, *at.channel)) {
        case failed::unreachable:
          *failure = s.error_message();
          return outcome::unreachable;
        case failed::late:
          *failure = s.error_message();
          return outcome::late;
        case failed::final:
          break;
      }
      *refusal = status_error(what, at.name, s);
      return detail::token_refused(s.error_message()) ? outcome::token_refused : outcome::refused;
    }
    if (t == start_tag) {
      pb::WatchRequest req;
      *req.mutable_create_request() = create;
      c.stream->Write(req, reinterpret_cast<void*>(write_tag));
      c.writing = true;
      c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
      c.reading = true;
    } else if (t == read_tag) {
      if (c.response.created() && !c.response.canceled()) return outcome::confirmed;
      if (c.response.canceled()) {
        std::string reason = c.response.cancel_reason();
        finish(cq, c, true);
        *refusal = make_error(errc::invalid_argument,
                              "etcd " + what + " at " + at.name + ": refused: " + reason);
        // etcd 3.4 gives an expired token's watch "permission denied", as it does a user's.
        const bool token =
            detail::token_refused(reason) || reason.find("permission denied") != std::string::npos;
        return token ? outcome::token_refused : outcome::refused;
      }
      c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));  // not the answer yet
      c.reading = true;
    }
  }
}

void watcher::impl::read(grpc::CompletionQueue& cq, call& c, const member& at) {
  c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
  c.reading = true;
  for (;;) {
    tag t = start_tag;
    bool ok = false;
    next(cq, c, steady::time_point::max(), &t, &ok);
    if (t != read_tag) continue;  // the create request's write completing
    if (!ok) {
      auto s = finish(cq, c, false);
      if (!is_stopping())
        deliver_end(errc::unavailable,
                    "etcd " + what + " at " + at.name + ": the stream ended: " +
                        (s.ok() ? std::string("closed by etcd") : s.error_message()),
                    0);
      return;
    }
    const pb::WatchResponse& r = c.response;
    if (r.canceled()) {
      const auto compacted = r.compact_revision();
      std::string reason = r.cancel_reason();
      finish(cq, c, true);
      if (compacted > 0)
        deliver_end(errc::not_found,
                    "etcd " + what + ": revision " + std::to_string(create.start_revision()) +
                        " is compacted (the oldest kept is " + std::to_string(compacted) +
                        "): list again and watch from the listing's revision + 1",
                    compacted);
      else
        deliver_end(errc::internal,
                    "etcd " + what + " at " + at.name + ": cancelled by etcd: " +
                        (reason.empty() ? std::string("no reason given") : reason),
                    0);
      return;
    }
    if (r.events_size() > 0 && !is_stopping()) {
      watch_update u;
      u.revision = r.header().revision();
      u.events.reserve(static_cast<std::size_t>(r.events_size()));
      for (const auto& e : r.events()) {
        watch_event out;
        out.type =
            e.type() == ::mvccpb::Event::DELETE ? watch_event::kind::erase : watch_event::kind::put;
        out.kv = from_pb(e.kv());
        u.events.push_back(std::move(out));
      }
      callback(u);
    }
    if (is_stopping()) {
      finish(cq, c, true);
      return;
    }
    c.stream->Read(&c.response, reinterpret_cast<void*>(read_tag));
    c.reading = true;
  }
}

void watcher::impl::deliver_end(errc code, std::string message, std::int64_t compact_revision) {
  ended = true;
  if (is_stopping()) return;
  watch_update u;
  u.error = make_error(code, std::move(message));
  u.compact_revision = compact_revision;
  callback(u);
}

void watcher::impl::attempt(grpc::CompletionQueue& cq, std::size_t at, steady::time_point until,
                            bool wait, std::optional<expected<void>>* given_up, bool* answered_late,
                            bool* failed_tls, std::string* failure) {
  const member& mb = members[at];
  bool renewed = false;  // a token etcd refused was replaced once already
  for (;;) {
    authenticator::ticket ticket;
    if (auth) {
      const grpc::Status s = auth->get(*mb.auth, until, wait, &ticket);
      if (!s.ok()) {
        *failure = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? "no connection in time"
                                                                         : s.error_message();
        if (auto why = detail::tls_failure(s, tls)) {
          *failure = std::move(*why);
          *failed_tls = true;
        } else if (classify(s, *mb.channel) == failed::final) {
          *given_up = expected<void>(detail::authentication_error(*auth, what, mb.name, s));
        }
        return;
      }
    }
    call c;
    warm::error refusal;
    switch (open_call(cq, c, mb, until, wait, ticket.token, failure, &refusal)) {
      case outcome::confirmed:
        confirmed.set_value({});
        read(cq, c, mb);
        *given_up = expected<void>();  // the watch ran; nothing more to try
        return;
      case outcome::token_refused:
        if (auth && !renewed) {
          renewed = true;
          auth->drop(ticket.generation);
          continue;
        }
        *given_up = expected<void>(std::move(refusal));
        return;
      case outcome::refused:
        *given_up = expected<void>(std::move(refusal));
        return;
      case outcome::late:
        *answered_late = true;
        return;
      case outcome::tls:
        *failed_tls = true;
        return;
      case outcome::unreachable:
        return;
    }
  }
}

void watcher::impl::run() {
  grpc::CompletionQueue cq;
  const auto deadline = steady::now() + timeout;
  const std::size_t n = members.size();
  std::vector<std::string> failures(n);
  std::vector<bool> tls_refused(n);  // its TLS handshake failed: not tried again
  std::size_t tls_refusals = 0;
  bool answered_late = false;
  milliseconds pause = first_pause;
  std::optional<expected<void>> given_up;
  std::vector<std::string> names;
  for (const auto& mb : members)
    names.push_back(mb.name);
  for (int round = 0; !given_up; ++round) {
    for (std::size_t i = 0; i < n && !given_up; ++i) {
      const std::size_t at = (first + i) % n;
      if (tls_refused[at]) continue;
      const auto now = steady::now();
      if (now >= deadline) break;
      bool tls = false;
      attempt(cq, at, share(now, deadline, n - i), round > 0, &given_up, &answered_late, &tls,
              &failures[at]);
      if (tls) {
        tls_refused[at] = true;
        if (++tls_refusals == n) given_up = expected<void>(tls_failed(what, names, failures));
      }
    }
    if (given_up) break;
    const auto now = steady::now();
    if (now >= deadline) {
      given_up = gave_up(what, names, failures, answered_late, timeout);
      break;
    }
    std::this_thread::sleep_for(std::min<steady::duration>(pause, deadline - now));
    pause = std::min(pause * 2, last_pause);
    for (auto& mb : members)
      reconnect_now(*mb.channel);
  }
  if (!given_up->has_value()) {
    ended = true;
    confirmed.set_value(std::move(*given_up));
  }
  cq.Shutdown();
  void* t = nullptr;
  bool ok = false;
  while (cq.Next(&t, &ok)) {
  }
}

void watcher::impl::stop() {
  std::lock_guard<std::mutex> lock(m);
  stopping = true;
  if (open) open->TryCancel();
}

watcher::watcher(std::shared_ptr<impl> state) : impl_(std::move(state)) {}

watcher::~watcher() {
  impl_->stop();
  if (impl_->thread.get_id() == std::this_thread::get_id())
    impl_->thread.detach();  // destroyed from its own callback: the thread ends by itself
  else if (impl_->thread.joinable())
    impl_->thread.join();
}

bool watcher::stopped() const {
  return impl_->ended.load();
}

expected<std::unique_ptr<watcher>> client::watch(const std::string& prefix,
                                                 std::int64_t start_revision,
                                                 watch_callback callback) {
  const std::string what = "watch " + quoted(prefix);
  if (!callback) return make_error(errc::invalid_argument, "etcd " + what + ": no callback");
  if (start_revision < 0)
    return make_error(errc::invalid_argument, "etcd " + what + ": the start revision is negative");
  auto state = std::make_shared<watcher::impl>();
  for (const auto& e : impl_->endpoints)
    state->members.push_back(
        {e.name, e.channel, pb::Watch::NewStub(e.channel), pb::Auth::NewStub(e.channel)});
  state->first = impl_->preferred.load();
  state->auth = impl_->auth;
  state->tls = impl_->tls;
  std::string key, end;
  set_prefix(prefix, &key, &end);
  state->create.set_key(key);
  state->create.set_range_end(end);
  state->create.set_start_revision(start_revision);
  state->what = what;
  state->timeout = impl_->opts.timeout;
  state->callback = std::move(callback);
  auto confirmed = state->confirmed.get_future();
  state->thread = std::thread([state] { state->run(); });
  auto r = confirmed.get();  // bounded: the thread gives up at the deadline
  if (!r) {
    state->thread.join();
    return std::move(r).error();
  }
  return std::make_unique<watcher>(std::move(state));
}

}  // namespace warm::etcd
