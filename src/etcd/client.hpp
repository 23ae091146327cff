// warm::etcd::client: a synchronous, thread-safe client of etcd's v3 API (gRPC), the subset warm's
// cluster mode needs: keys (get, list by prefix, put, erase), compare-and-set by transaction,
// leases, and watches (docs/etcd-client.md), over plain HTTP/2 or TLS (client certificates
// included), with etcd's user/password authentication or without.
//
// This header includes neither gRPC nor protobuf: the client is a pimpl over
// src/etcd/client.cpp, so code that uses it compiles quickly.
//
// Contracts that hold for every call:
//  1. Blocking. Every call blocks its thread until etcd answers or the call's deadline passes
//     (options::timeout after the call began, whichever endpoints it tries). Call it from a thread
//     that may block (an I/O thread), never from a CAF scheduler thread.
//  2. Thread-safe. Any number of threads may use one client at once. Calls are not ordered with
//     each other unless the caller orders them (one thread, or waiting for one before the next).
//  3. Failover and retry within the deadline. A call goes first to the endpoint that answered
//     last. When an endpoint cannot be reached (refused, reset, no connection within the attempt's
//     time, or a member without a leader) the call moves on to the next one, round the list;
//     after a round without an answer it pauses (50 ms, doubling up to 500 ms) and goes round
//     again, now waiting for connections, until the deadline. With several endpoints an attempt
//     gets an equal share of the time left, so that a member that takes requests but never
//     answers cannot use up the whole deadline. A request that was sent and not answered in its
//     share: a read moves on to the next endpoint; a write does not (it may have been applied)
//     and fails with errc::timeout.
//  4. Errors (warm::errc), each with a message naming the operation and the endpoint(s):
//       unavailable       no endpoint could be reached within the deadline (etcd is down or
//                         partitioned). A write that failed so was most likely not applied, but
//                         this is not certain when the connection dropped after sending it.
//                         Also, at once: TLS failed with every endpoint (contract 7).
//       timeout           an endpoint took the request and did not answer in time, or etcd said it
//                         timed out applying it: a write's outcome is unknown (read it back).
//       invalid_argument  the caller's input (empty key, bad endpoint, ...) or a request etcd
//                         refused as malformed, too large or not permitted, or a revision that is
//                         compacted or in the future; etcd refusing the user or password, or the
//                         user's roles not permitting the operation on the key (contract 8).
//       not_found         an unknown lease (revoke_lease, or put with a lease that is gone).
//       capacity_exhausted etcd's store is full (its space quota) or it refuses more requests.
//       internal          anything else etcd or gRPC reported (the message has gRPC's code).
//  5. Keys and values are byte strings (std::string may hold any bytes). Keys must not be empty.
//  6. Surviving restarts. The client keeps one gRPC channel per endpoint for its whole life and
//     reconnects by itself (backoff from 100 ms to 1 s between attempts, none while a call is
//     retrying): after etcd comes back, calls succeed again on the same client.
//  7. TLS (https endpoints). The handshake checks etcd's certificate against options::ca_file
//     and the endpoint's host, and presents options::cert_file when given. When TLS fails (a CA
//     that did not sign etcd's certificate, a host the certificate does not name, a client
//     certificate etcd refuses or one missing where etcd asks for one), that endpoint is not
//     tried again within the call: once every endpoint has failed so, the call fails at once
//     with errc::unavailable, its message saying "TLS ... failed" with gRPC's reason. (With TLS
//     1.3 etcd refuses a client certificate only after the client's side of the handshake, and
//     gRPC then reports "Endpoint read failed": a TLS connection that fails so before etcd's
//     first answer is taken for a refused certificate, and the message says so.)
//  8. etcd's authentication (options::user and options::password). The first call that needs a
//     token gets one (Auth.Authenticate, within that call's deadline, on the endpoint it is
//     trying); every call then sends it as the gRPC metadata `token`, watch and keep-alive
//     streams included. When etcd refuses the token (it expired: simple tokens live
//     --auth-token-ttl seconds, 300 by default, after their last use; or the users and roles
//     changed since it was issued) the call gets a new one and is sent again, once; a refused
//     token means nothing was applied, so writes are sent again too. etcd 3.4 refuses a watch
//     with an expired token as "permission denied": a watch refused so is tried once more with
//     a new token before that is its answer. A wrong user or password is
//     errc::invalid_argument "etcd refused user 'NAME': authentication failed", at once (each
//     call asks etcd once; none loops). A user whose roles do not permit a call gets
//     errc::invalid_argument naming the operation and key, "permission denied". The password is
//     never part of a message. Without a user, a client certificate's common name is the user
//     when etcd runs with --client-cert-auth; with neither, etcd with authentication on refuses
//     every call ("user name is empty").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::etcd {

// How to reach etcd. Validated by client::connect.
struct options {
  // The members' client URLs: "http://host:port", "https://host:port" or "host:port" (http;
  // IPv6 as "[::1]:2379"). At least one; all http or all https (invalid_argument otherwise).
  std::vector<std::string> endpoints;

  // ---- TLS: https endpoints only (invalid_argument when one is given with http endpoints).
  // connect() reads the files (a change later takes a new client); one that is missing,
  // unreadable or not PEM is invalid_argument naming the option and the path.
  //
  // The CA certificate(s) that signed etcd's server certificate (PEM). Empty: gRPC's default
  // roots (the system's). etcd's certificate must name the endpoint's host (an address as a
  // subjectAltName IP entry).
  std::string ca_file;
  // A client certificate and its private key (PEM), for an etcd run with --client-cert-auth:
  // both or neither (invalid_argument). With etcd's authentication on and no `user`, etcd takes
  // the certificate's common name (CN) as the user.
  std::string cert_file;
  std::string key_file;

  // ---- etcd's authentication (etcdctl auth enable): a user and its password, both or neither
  // (invalid_argument). The password is sent in Auth.Authenticate only (in clear text over http
  // endpoints: use https) and never appears in an error. See contract 8.
  std::string user;
  std::string password;

  // Each call's deadline, from its start to its answer, across every endpoint it tries. > 0.
  std::chrono::milliseconds timeout{2000};
  // How often an open connection is checked with an HTTP/2 ping while a call or watch is open, so
  // that a member that vanished without closing the connection is noticed; a ping unanswered for
  // `timeout` closes the connection. etcd refuses pings more often than every 5 s (its default
  // --grpc-keepalive-min-time), so this must be at least 5 s.
  std::chrono::milliseconds keepalive{10000};
  // Keys per Range request when get_prefix lists a prefix; the pages are read at one revision, so
  // the listing is one consistent snapshot whatever its size. > 0.
  std::int64_t page_size = 1000;
};

// One key as stored by etcd.
struct key_value {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // the revision that created the key
  std::int64_t mod_revision = 0;     // the revision of its last write
  std::int64_t version = 0;          // writes since it was created (1 after the first put)
  std::int64_t lease = 0;            // the lease the key is attached to; 0 for none

  friend bool operator==(const key_value& a, const key_value& b) {
    return a.key == b.key && a.value == b.value && a.create_revision == b.create_revision &&
           a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
  }
};

// The keys under a prefix, sorted by key, as of one revision.
struct range_result {
  std::vector<key_value> kvs;
  std::int64_t revision = 0;  // the store's revision the listing reflects: watch from revision + 1
};

// The outcome of a deletion.
struct erase_result {
  std::int64_t deleted = 0;   // how many keys were deleted
  std::int64_t revision = 0;  // the store's revision after the call
};

// The outcome of a compare-and-set (put_if, erase_if).
struct cas_result {
  bool succeeded = false;
  // The store's revision after the call: when succeeded, the revision of this write (for put_if,
  // the key's new mod_revision).
  std::int64_t revision = 0;
  // When it did not succeed: the key as it is now (nullopt: the key does not exist), read in the
  // same transaction as the failed comparison, so a caller can retry against current->mod_revision.
  std::optional<key_value> current;
};

// One condition of a transaction: `key`'s mod_revision is `mod_revision`, or, when that is 0, the
// key does not exist.
struct txn_condition {
  std::string key;
  std::int64_t mod_revision = 0;
};

// One write of a transaction: put `value` under `key` (on `lease` when not 0), or delete `key`
// when value is nullopt.
struct txn_write {
  std::string key;
  std::optional<std::string> value;
  std::int64_t lease = 0;
};

// The outcome of a transaction.
struct txn_result {
  bool succeeded = false;
  // The store's revision after the call: when succeeded, the revision of its writes.
  std::int64_t revision = 0;
  // When it did not succeed: each condition's key as it is now (nullopt: it does not exist), in
  // the conditions' order, read in the same transaction as the failed comparison.
  std::vector<std::optional<key_value>> current;
};

using lease_id = std::int64_t;

// A granted lease.
struct lease {
  lease_id id = 0;
  std::int64_t ttl_seconds = 0;  // as granted: etcd raises a TTL below its minimum (about 2 s)
};

// One change seen by a watch.
struct watch_event {
  enum class kind { put, erase };
  kind type = kind::put;
  // For a put, the key as written. For an erase, the key with mod_revision the revision of the
  // deletion and every other field 0 or empty.
  key_value kv;
};

// What a watch delivers to its callback: the events of one or more revisions, in order, or the
// end of the watch.
struct watch_update {
  std::vector<watch_event> events;  // in revision order; empty when `error` is set
  std::int64_t revision = 0;        // the store's revision when etcd sent this update
  // Set on the last update of a watch, which then delivers nothing more. Codes:
  //   not_found    the watch's start revision is compacted away (compact_revision says the oldest
  //                revision still kept): re-list with get_prefix, then watch from its revision + 1;
  //   unavailable  the stream failed (etcd went away, lost its leader, or closed the stream):
  //                re-list and watch again once etcd answers;
  //   internal     etcd ended the watch for another reason (its message is in the error).
  std::optional<warm::error> error;
  std::int64_t compact_revision = 0;
};

// Called on the watcher's own thread, one update at a time, in order. It may call the client
// (other keys, another watch) but must not block for long: updates wait behind it. It must not
// destroy its own watcher, and must not throw.
using watch_callback = std::function<void(const watch_update&)>;

// A running watch: owns one gRPC stream and one thread that reads it and calls the callback.
// Destroying it cancels the stream and joins the thread; once the destructor returns, the callback
// is not called again. The destructor returns promptly (it does not wait for etcd). A watcher
// may outlive the client that made it.
class watcher {
 public:
  struct impl;
  explicit watcher(std::shared_ptr<impl> state);
  ~watcher();
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;

  // Whether the watch has ended (its final update, with an error, was delivered or is being
  // delivered). A stopped watch stays stopped: watch again for more.
  bool stopped() const;

 private:
  std::shared_ptr<impl> impl_;
};

class client {
 public:
  struct impl;

  // Validates `opts` (errc::invalid_argument naming the bad field or endpoint) and makes a client
  // of those endpoints. Does no I/O: it succeeds whether or not etcd is up, and the first call
  // connects.
  static expected<std::unique_ptr<client>> connect(options opts);

  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // The endpoints as given to connect().
  const std::vector<std::string>& endpoints() const;

  // ---- keys ---------------------------------------------------------------------------------

  // The key's current value, or nullopt when it does not exist. A linearizable read.
  expected<std::optional<key_value>> get(const std::string& key);
  // Every key starting with `prefix` (empty: every key), sorted, as of one revision; read in pages
  // of options::page_size.
  expected<range_result> get_prefix(const std::string& prefix);
  // Writes `value` under `key`, attached to `lease` (0: none; the lease must exist, else
  // not_found). Returns the revision of the write (the key's new mod_revision).
  expected<std::int64_t> put(const std::string& key, const std::string& value, lease_id lease = 0);
  // Deletes the key; deleted is 0 when it did not exist.
  expected<erase_result> erase(const std::string& key);
  // Deletes every key starting with `prefix`, which must not be empty.
  expected<erase_result> erase_prefix(const std::string& prefix);

  // ---- compare-and-set (one etcd transaction each) ------------------------------------------

  // Writes `value` under `key` only if the key's mod_revision is `expected_mod_revision`, or, when
  // that is 0, only if the key does not exist. On failure, `current` is the key as it is.
  // expected_mod_revision must be >= 0.
  expected<cas_result> put_if(const std::string& key, const std::string& value,
                              std::int64_t expected_mod_revision, lease_id lease = 0);
  // Deletes `key` only if its mod_revision is `expected_mod_revision` (> 0). On failure,
  // `current` is the key as it is (nullopt: it no longer exists).
  expected<cas_result> erase_if(const std::string& key, std::int64_t expected_mod_revision);

  // Applies every write, in one revision, only if every condition holds. At most
  // max_txn_operations conditions and as many writes (etcd's default --max-txn-ops), each write to
  // a different key (etcd refuses two writes of one key in a transaction): invalid_argument
  // otherwise.
  static constexpr std::size_t max_txn_operations = 128;
  expected<txn_result> transact(const std::vector<txn_condition>& conditions,
                                const std::vector<txn_write>& writes);

  // ---- leases -------------------------------------------------------------------------------

  // A new lease of `ttl` (> 0) seconds. Keys put with it are deleted when it expires or is
  // revoked. It expires unless renewed with keep_alive_once more often than every ttl_seconds.
  expected<lease> grant_lease(std::int64_t ttl_seconds);
  // Ends the lease now, deleting its keys in one revision. errc::not_found when it does not exist
  // (expired, revoked, or never granted).
  expected<void> revoke_lease(lease_id id);
  // Renews the lease once (one exchange on a LeaseKeepAlive stream): its time to live in seconds,
  // counting from now. 0 means the lease has expired or does not exist: its keys are gone, and
  // the owner must grant a new lease and put its keys again.
  expected<std::int64_t> keep_alive_once(lease_id id);
  // The seconds the lease has left, without renewing it; 0 when expired or unknown.
  expected<std::int64_t> time_to_live(lease_id id);

  // ---- watch --------------------------------------------------------------------------------

  // Watches every key starting with `prefix` (empty: every key) from `start_revision` (0: changes
  // after etcd has registered the watch; a past revision replays the history kept since then,
  // e.g. get_prefix's revision + 1). Returns once etcd has confirmed the watch (or with the error
  // of a call, within the deadline); from then on `callback` gets every change, in revision
  // order, on the watcher's thread, until the watcher is destroyed or an update with an error
  // ends the watch (see watch_update). Events are not retried or resumed behind the caller's
  // back: after an error, re-list and watch again.
  expected<std::unique_ptr<watcher>> watch(const std::string& prefix, std::int64_t start_revision,
                                           watch_callback callback);

 private:
  explicit client(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

// The first key after every key starting with `prefix`: the range_end of a prefix range
// ("a/" -> "a0"; a prefix of 0xff bytes or an empty one -> "\0", meaning "to the end").
std::string prefix_end(const std::string& prefix);

}  // namespace warm::etcd
