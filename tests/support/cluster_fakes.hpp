// Fakes of what the cluster's drivers use (cluster/store.hpp, cluster/peers.hpp,
// cluster/membership.hpp), for deterministic tests of the placer and the copy scaler: an
// in-memory store with etcd's revisions and transactions, peers that answer as a test scripts
// them, and a fixed view of the members. Thread-safe (the drivers call them from their threads).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/membership.hpp"
#include "cluster/peers.hpp"
#include "cluster/store.hpp"

namespace warm::test {

class fake_store final : public cluster::kv_store {
 public:
  expected<std::optional<etcd::key_value>> get(const std::string& key) override;
  expected<etcd::range_result> get_prefix(const std::string& prefix) override;
  expected<std::int64_t> put(const std::string& key, const std::string& value,
                             etcd::lease_id lease) override;
  expected<etcd::txn_result> transact(const std::vector<etcd::txn_condition>& conditions,
                                      const std::vector<etcd::txn_write>& writes) override;

  // While down, every call answers unavailable.
  void set_down(bool down);
  // While held, every call waits (until release()); `waiting()` says whether one does.
  void hold();
  void release();
  bool wait_waiting(std::chrono::milliseconds limit = std::chrono::seconds(10));

  // Runs `before` (once) when the next transaction arrives, before it is applied: what another
  // writer does between a driver's read and its compare-and-set.
  void on_next_transaction(std::function<void(fake_store&)> before);

  std::optional<etcd::key_value> key(const std::string& key) const;
  std::vector<etcd::key_value> under(const std::string& prefix) const;
  int lookups() const;       // get calls
  int reads() const;         // get_prefix calls
  int transactions() const;  // transact calls

 private:
  expected<void> enter(std::unique_lock<std::mutex>& lock);
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, etcd::key_value> kvs_;
  std::function<void(fake_store&)> before_transaction_;
  std::int64_t revision_ = 1;
  bool down_ = false, held_ = false;
  int waiting_ = 0, lookups_ = 0, reads_ = 0, transactions_ = 0;
};

class fake_peers final : public cluster::peer_calls {
 public:
  struct call {
    std::string address, model;
  };
  // How the instance at an address answers a forward (default: a result with no outputs whose
  // model is "peer ADDRESS").
  using infer_answer = std::function<expected<infer_result>(const infer_request&)>;
  void answer_infer(const std::string& address, infer_answer answer);
  void infer(const std::string& address, infer_request request,
             callback<infer_result> done) override;
  void ensure(const std::string& address, const std::string& model, callback<void> done) override;

  std::vector<call> inferred() const;
  std::vector<call> ensured() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, infer_answer> answers_;
  std::vector<call> inferred_, ensured_;
};

class fake_members final : public cluster::member_view {
 public:
  explicit fake_members(std::vector<cluster::member> members, std::int64_t lease = 77);
  cluster::membership_status status() const override;
  std::vector<cluster::member> members() const override;
  void set(std::vector<cluster::member> members);

 private:
  mutable std::mutex mutex_;
  std::vector<cluster::member> members_;
  std::int64_t lease_;
};

// A live instance named `name` at "unix:/run/<name>" with one host device of `capacity` bytes,
// `used` of them used, holding `residents`.
cluster::member instance(const std::string& name, std::uint64_t capacity, std::uint64_t used,
                         bool self = false, std::vector<std::string> residents = {});

}  // namespace warm::test
