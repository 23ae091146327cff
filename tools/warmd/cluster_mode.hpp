// warmd's part in a cluster (--cluster, docs/cluster.md): its membership, started from the flags,
// and its answer to Warm.clusterInfo. Built with the etcd client (WARM_HAVE_CLUSTER); without it,
// --cluster is a usage error.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "config.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"
#include "warm/runtime_types.hpp"

namespace warm::node {
class membership;
}

namespace warm::warmd {

class cluster_mode {
 public:
  // Joins the cluster the flags name, for the runtime `rt` (borrowed; it must outlive this).
  // invalid_argument for bad flags (names, an address that cannot be advertised). Does not wait
  // for etcd: an instance whose etcd is down serves alone and joins once etcd answers.
  static expected<std::unique_ptr<cluster_mode>> start(const config& c, runtime& rt);
  ~cluster_mode();

  // This instance's view of the cluster (Warm.clusterInfo); answers at once, on the caller's
  // thread.
  void info(callback<cluster_info> done) const;
  // Leaves the cluster: revokes the lease, so the record goes at once. Later info() calls answer
  // with the cluster's name and an empty view.
  void leave();

 private:
  cluster_mode(std::string name, std::unique_ptr<node::membership> m);
  std::string name_;
  mutable std::mutex mutex_;
  std::unique_ptr<node::membership> membership_;
};

// The address peers reach this instance at: --advertise, else the first --listen, a relative
// unix socket path made absolute. invalid_argument when neither gives one.
expected<std::string> advertised_address(const config& c);

}  // namespace warm::warmd
