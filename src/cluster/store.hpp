// The keys the cluster's drivers read and write (placement claims, failures, copies): the part of
// etcd's interface they use, so that the placer and the copy scaler run over a real etcd in
// warmd and over an in-memory store in their tests.
//
// Contract (etcd's, etcd/client.hpp): every call is linearizable and thread-safe; a transaction
// applies all its writes at one new revision only when every condition holds, else it reports
// each condition's key as it is now; a key put on a lease goes when the lease goes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd/client.hpp"
#include "warm/error.hpp"

namespace warm::cluster {

class kv_store {
 public:
  virtual ~kv_store() = default;
  virtual expected<std::optional<etcd::key_value>> get(const std::string& key) = 0;
  virtual expected<etcd::range_result> get_prefix(const std::string& prefix) = 0;
  virtual expected<std::int64_t> put(const std::string& key, const std::string& value,
                                     etcd::lease_id lease) = 0;
  virtual expected<etcd::txn_result> transact(const std::vector<etcd::txn_condition>& conditions,
                                              const std::vector<etcd::txn_write>& writes) = 0;
};

// The store over a client of the cluster's etcd (owned).
std::unique_ptr<kv_store> etcd_store(std::unique_ptr<etcd::client> client);

}  // namespace warm::cluster
