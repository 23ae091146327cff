// The registry of a cluster, kept in etcd and shared by every instance (docs/cluster.md): a
// registry_storage whose records live under /warm/<cluster>/registry/, one key per model
// (models/<id>) and vmodel (vmodels/<id>), each a JSON object.
//
// Contract, beyond registry_storage's:
//  1. apply() writes a batch in one etcd transaction, compare-and-set: it compares every key it
//     writes with the mod_revision this store last saw for it (0: absent). A batch of more than
//     etcd::client::max_txn_operations keys goes as several transactions, each all or nothing.
//     A lost comparison is re-read: where etcd already holds what the batch writes (another
//     instance registered the same thing) that part succeeds; where another instance wrote
//     something else the batch fails with unavailable, naming the record. etcd unreachable:
//     unavailable, nothing written. An unknown outcome (etcd took the request and did not answer
//     in time): timeout.
//  2. follow() starts a thread that watches the registry's keys from the loaded revision and
//     delivers every change others made, in revision order; this store's own writes are not
//     delivered (each transaction's revision is recorded before the watch can see it). After a
//     watch fails (etcd restarted or unreachable) it resumes from the last revision delivered;
//     when that revision was compacted away it re-lists the registry and delivers it whole (a
//     reset). A record that cannot be decoded is logged and skipped (load() skips it too).
//  3. Thread-safety: load, apply and seen from one thread at a time (the registry's writer);
//     follow once, from any thread. The destructor stops the follower and waits for it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "etcd/client.hpp"
#include "storage/registry_storage.hpp"

namespace warm::cluster {

struct etcd_registry_options {
  std::shared_ptr<etcd::client> etcd;
  std::string cluster = "warm";  // the registry is under cluster_root(cluster) + "registry/"
  // Told of skipped records and of the follower's watch failures and recoveries (from the
  // follower's thread, or the caller's). May be empty.
  std::function<void(const std::string&)> log;
  // How long the follower waits before watching again after a failure.
  std::chrono::milliseconds retry{1000};
};

// The store. invalid_argument for a bad cluster name or no client. Does no I/O.
expected<std::unique_ptr<registry_storage>> open_etcd_registry(etcd_registry_options options);
// The same over a new client of the etcd that `access` names (etcd::client::connect's errors).
expected<std::unique_ptr<registry_storage>> open_etcd_registry(
    const etcd::options& access, std::string cluster, std::function<void(const std::string&)> log);

// The registry's keys and values (pure; tests and tools use them).
std::string registry_prefix(const std::string& root);  // root + "registry/"
std::string encode_model(const model_record& record);
std::string encode_vmodel(const vmodel_record& record);
// The change a put or an erase of `key` (under `prefix`) stands for; invalid_argument naming the
// key for a key outside models/ and vmodels/, an empty id, or a value that is not a record.
expected<registry_change> decode_change(const std::string& prefix, const std::string& key,
                                        const std::optional<std::string>& value);

}  // namespace warm::cluster
