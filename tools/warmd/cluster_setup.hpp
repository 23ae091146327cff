// warmd's cluster mode from its flags (--cluster and the flags beside it, docs/cluster.md): the
// registry the instances share in etcd, and joining the cluster (cluster/cluster_mode.hpp).
#pragma once

#include <memory>
#include <string>

#include "cluster/cluster_mode.hpp"
#include "cluster/peer_tls.hpp"
#include "config.hpp"
#include "net/tls.hpp"
#include "storage/registry_storage.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"

namespace warm::warmd {

// The registry of the cluster the flags name, kept in etcd and shared by its instances
// (cluster/etcd_registry.hpp): runtime_options::registry_store in cluster mode. Its changes and
// failures are logged.
expected<std::unique_ptr<registry_storage>> cluster_registry(const config& c);

struct joined_cluster {
  std::unique_ptr<cluster::cluster_mode> mode;
  // With TLS (`front_tls` given), peers are dialled with it: renew it on SIGHUP. Null otherwise.
  std::shared_ptr<cluster::peer_tls> tls;
  std::string address;  // where peers reach this instance
};

// Joins the cluster the flags name for `rt`, forwards presenting `token`. With `front_tls`
// (the listeners' certificates), instances dial each other with TLS: this instance's certificate
// presented, theirs checked against --tls-client-ca and the host each advertises.
// invalid_argument for flags that cannot be used (names, an address that cannot be advertised or
// is not in the certificate, --etcd-* flags).
expected<joined_cluster> join_cluster(const config& c, runtime& rt, const std::string& token,
                                      std::shared_ptr<const net::tls_material> front_tls);

}  // namespace warm::warmd
