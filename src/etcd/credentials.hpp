// How warm's etcd client proves who it is (docs/etcd-client.md, "A secured etcd"): the TLS
// channel credentials of https endpoints, and etcd's own authentication by user and password,
// whose token rides on every call as the gRPC metadata `token`.
//
// Private to src/etcd: it includes gRPC and the generated code, as client.cpp does; client.hpp
// stays free of both.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "etcd.grpc.pb.h"
#include "etcd/client.hpp"

namespace warm::etcd::detail {

// The channel credentials for `opts` (already checked for the endpoints' scheme: `tls` says
// whether they are https). Plain text for http. For https, gRPC's SSL credentials with the
// contents of ca_file (empty: gRPC's default roots, the system's), cert_file and key_file, read
// now: a later change of the files takes a new client. invalid_argument, naming the option and
// the path, for a file that is missing, unreadable, empty or not PEM; for a cert_file without
// key_file or the other way round; and for TLS files given with http endpoints.
expected<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const options& opts,
                                                                        bool tls);

// When a failed call's status says that TLS failed rather than that the member is down (gRPC
// reports both as UNAVAILABLE), what to tell of it; nullopt otherwise. `tls`: the call's
// endpoint is https. Two shapes:
//  - the handshake failed on this side (etcd's certificate not signed by the CA, not naming the
//    host; no common protocol): gRPC's message names the SSL error;
//  - with TLS 1.3 the client's side of the handshake is over before etcd checks the client's
//    certificate, so a certificate etcd refuses (none, or one its CA did not sign) shows as the
//    connection failing as soon as it is read, before etcd's first HTTP/2 frame; gRPC logs the
//    TLS alert but says only "Endpoint read failed". A member that is down refuses the
//    connection instead, and one that hangs never completes it.
std::optional<std::string> tls_failure(const grpc::Status& s, bool tls);

// Whether etcd's error message (a status's, or a watch's cancel reason) refuses a call for its
// token, before applying anything: the token expired or is unknown ("invalid auth token"), was
// issued before the auth store changed ("revision of auth store is old"), or is missing while
// authentication is on ("user name is empty"). A call with a fresh token may then succeed.
bool token_refused(const std::string& message);

// etcd's authentication by user and password, shared by a client and its watchers (which may
// outlive the client). Thread-safe. A token is got lazily, by the first call that needs one,
// through Auth.Authenticate on the endpoint that call is trying, within that attempt's deadline;
// every call after it sends the same token, until a call finds it refused and drops it (the next
// call then gets a fresh one). One Authenticate at a time: a call that finds another one under
// way waits for its token (up to its own deadline) rather than asking too. The password is kept
// here and sent in Authenticate requests only; it is never part of a message.
class authenticator {
 public:
  authenticator(std::string user, std::string password);

  const std::string& user() const { return user_; }

  // What a call sends: `token` (empty when etcd has authentication off) and which token it was.
  struct ticket {
    std::string token;
    std::uint64_t generation = 0;
  };

  // The current token in *out, getting one from etcd through `auth` first when there is none.
  // OK, or the failed Authenticate's status: etcd's refusal (wrong user or password: not to be
  // retried), or a failure to reach etcd (retry elsewhere). etcd answering that authentication is
  // off counts as success with an empty token. `until` bounds both the wait for another call's
  // Authenticate and this one's.
  grpc::Status get(::etcdserverpb::Auth::Stub& auth, std::chrono::steady_clock::time_point until,
                   bool wait_for_ready, ticket* out);

  // Forgets the token of `generation` (one etcd refused), unless it was replaced already.
  void drop(std::uint64_t generation);

 private:
  const std::string user_, password_;
  std::timed_mutex fetching_;  // held by the call running Authenticate
  std::mutex m_;               // guards the three below
  bool have_ = false;          // token_ is current (it may be empty: authentication off)
  std::string token_;
  std::uint64_t generation_ = 0;
};

// The error for a failed Authenticate that reached etcd (`s` not OK and not a failure to reach
// it), for the call `what` at `endpoint`: invalid_argument "etcd refused user 'U'..." for wrong
// credentials, invalid_argument for another refusal; etcd's message is kept, never the password.
warm::error authentication_error(const authenticator& auth, const std::string& what,
                                 const std::string& endpoint, const grpc::Status& s);

}  // namespace warm::etcd::detail
