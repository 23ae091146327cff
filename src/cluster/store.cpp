#include "cluster/store.hpp"

namespace warm::cluster {
namespace {

class over_etcd final : public kv_store {
 public:
  explicit over_etcd(std::unique_ptr<etcd::client> c) : client_(std::move(c)) {}
  expected<std::optional<etcd::key_value>> get(const std::string& key) override {
    return client_->get(key);
  }
  expected<etcd::range_result> get_prefix(const std::string& prefix) override {
    return client_->get_prefix(prefix);
  }
  expected<std::int64_t> put(const std::string& key, const std::string& value,
                             etcd::lease_id lease) override {
    return client_->put(key, value, lease);
  }
  expected<etcd::txn_result> transact(const std::vector<etcd::txn_condition>& conditions,
                                      const std::vector<etcd::txn_write>& writes) override {
    return client_->transact(conditions, writes);
  }

 private:
  std::unique_ptr<etcd::client> client_;
};

}  // namespace

std::unique_ptr<kv_store> etcd_store(std::unique_ptr<etcd::client> client) {
  return std::make_unique<over_etcd>(std::move(client));
}

}  // namespace warm::cluster
