// An instance's membership of a cluster (docs/cluster.md): its record in etcd on a lease, kept
// alive and republished as its state changes, and the live instances as the other records say.
//
// Threads. The membership owns one session thread, the only one that writes to etcd, and one
// etcd watch (with its own thread) on the instances' records. Neither is a CAF scheduler thread;
// the session thread waits on etcd and on the runtime's inspection. Every public method is
// thread-safe and returns without waiting on etcd, except the destructor (see below).
//
// The session, in a loop:
//  1. Without a lease: grant one of lease_ttl and put the record on it (a record written on a
//     lease disappears when the lease ends, so a dead instance leaves the cluster by itself within
//     lease_ttl). Failures are retried every second, for as long as it takes: an instance whose
//     etcd is down keeps serving and joins once etcd answers.
//  2. Keep the lease alive every lease_ttl / 3. A lease that etcd reports gone (it expired while
//     this instance could not reach etcd) is replaced: back to 1.
//  3. Republish the record when the instance's state changes (models loaded, bytes used, loads,
//     draining), at most every min_publish_interval, and at least every refresh_interval (ages and
//     values drift without a change).
//  4. Keep a watch on every instance's record; when it ends (etcd went away, history compacted),
//     list them again and watch from there.
// Destroying the membership revokes the lease (the record goes at once; best effort, within
// etcd_timeout) and joins both threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/records.hpp"
#include "etcd/client.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::cluster {

struct membership_options {
  std::vector<std::string> endpoints;  // etcd client URLs, at least one
  // How to reach a secured etcd: TLS files, user and password (etcd/client.hpp); its endpoints
  // and timeout are ignored (the fields here set them).
  etcd::options etcd_access;
  std::string cluster = "warm";        // the cluster's name: its keys live under /warm/<cluster>/
  std::string instance;                // this instance's name, unique in the cluster
  std::string address;                 // where peers reach this instance (Cap'n Proto)
  std::string version;                 // warm's version, for the record
  std::chrono::seconds lease_ttl{10};  // ≥ 2 (etcd's minimum)
  std::chrono::milliseconds min_publish_interval{1000};
  std::chrono::milliseconds refresh_interval{10000};
  std::chrono::milliseconds etcd_timeout{2000};  // each etcd call's deadline
  // The runtime's inspection, asked on the session thread (answer within etcd_timeout, or the
  // record is not republished this time).
  std::function<void(callback<inspection>)> inspect;
  // Where warnings go (lost lease, etcd unreachable, a malformed record); may be empty.
  std::function<void(const std::string&)> log;
  // Where news goes (joined); may be empty.
  std::function<void(const std::string&)> note;
  // Told of each other instance whose record went (its lease expired, or it left), with its last
  // record, on the watch's thread, after the live instances no longer list it; may be empty. It
  // may call the membership's methods; it must not wait on etcd.
  std::function<void(const instance_record&)> gone;
};

// What the membership knows now.
struct membership_status {
  std::string cluster;
  std::string instance;
  std::vector<std::string> endpoints;
  bool joined = false;          // holds a lease and its record is published
  std::int64_t lease = 0;       // the lease's id; 0 without one
  std::string last_error;       // the last etcd failure, "" once a call succeeds again
  std::vector<member> members;  // by name; this instance among them once its record is seen
};

// The live instances as this instance sees them: what the cluster's drivers read (the membership
// in warmd, a fixed list in their tests). Thread-safe; never waits on etcd.
class member_view {
 public:
  virtual ~member_view() = default;
  virtual membership_status status() const = 0;
  // The live instances (this one included once its record is seen), by name.
  virtual std::vector<member> members() const = 0;
};

class membership final : public member_view {
 public:
  // Validates the options (invalid_argument naming the field: endpoints, names, lease TTL,
  // intervals, a missing inspect) and starts the session thread. Does not wait for etcd.
  static expected<std::unique_ptr<membership>> start(membership_options options);
  ~membership();
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  // Marks the instance draining (or not) and republishes its record at once.
  void set_draining(bool draining);
  membership_status status() const override;
  std::vector<member> members() const override;

  // The live instances whose records list `model` as resident, by name: what a forward needs,
  // without copying every record (the inference path asks on every miss).
  using holder = cluster::holder;
  std::vector<holder> holders(const std::string& model) const;

  struct state;  // shared with the threads

 private:
  explicit membership(std::shared_ptr<state> s);
  std::shared_ptr<state> state_;
};

}  // namespace warm::cluster
