// warm::etcd::client over etcd's v3 gRPC API (client.hpp has the contracts): connecting, and the
// unary calls (keys, transactions, leases); watches are in watch.cpp.
//
// Unary calls use gRPC's synchronous API, one ClientContext per attempt with the attempt's
// deadline. LeaseKeepAlive is a short synchronous stream under the call's deadline. A watch runs
// gRPC's asynchronous API on its own thread and completion queue, so that waiting for etcd's
// confirmation is bounded by a deadline and the destructor can cancel a read at any time. TLS and
// etcd's tokens come from credentials.hpp: every attempt (a watch's too) first takes the current
// token, and a call whose token etcd refused drops it and is tried once more.
#include "etcd/client_impl.hpp"

namespace warm::etcd {

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

}  // namespace warm::etcd
