// Cluster misses for models that no instance holds (docs/cluster.md): the placement thread of
// warmd's cluster mode. It reads the placement claims in etcd, decides with node::decide_placement,
// claims the model by a compare-and-set when this instance places it, and hands each request to
// the instance that loads it: this one (the runtime) or a peer (peer_client).
//
// Contract:
//  - place() returns at once; the request is answered from the runtime or a peer, exactly once.
//  - Requests that arrive together for one model are decided together (one etcd read, one claim).
//  - etcd unreachable, a model this instance cannot size, or no member to place on: the request
//    is served here, as a warmd running alone would.
//  - A request sent to the instance placement chose comes back when the model's load fails there
//    (load_failed, capacity_exhausted, model_too_large): it is placed again, once, without that
//    instance. A model whose load failed here is placed elsewhere too. Failed loads, here (the
//    runtime's LOADING_FAILED events) or answered by a peer, are recorded in etcd for 15 minutes.
//  - The destructor serves what is still queued here and joins the thread; the runtime, the
//    membership and the peer client it borrows must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/records.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}
namespace warm::etcd {
class client;
}
namespace warm::node {
class membership;
}

namespace warm::warmd {

class peer_client;

class placer {
 public:
  struct options {
    std::unique_ptr<etcd::client> etcd;
    std::string root;                        // the cluster's keys (node::cluster_root)
    std::string instance;                    // this instance's name
    runtime* rt = nullptr;                   // borrowed
    node::membership* membership = nullptr;  // borrowed
    peer_client* peers = nullptr;            // borrowed
    std::chrono::milliseconds claim_life{60000};
    std::function<void(const std::string&)> log;  // warnings; may be empty
  };

  // invalid_argument when a borrowed part or etcd is missing.
  static expected<std::unique_ptr<placer>> start(options o);
  ~placer();
  placer(const placer&) = delete;
  placer& operator=(const placer&) = delete;

  // Serves `request` for `model` (no instance holds it) where placement says.
  void place(const std::string& model, infer_request request, callback<infer_result> done);

  // Another instance went (its lease expired) holding these hot models: each one that no live
  // instance holds or loads is placed as a miss would be, and loaded there at once, before its
  // next request (here: runtime::ensure_loaded; elsewhere: peer_client::ensure). Pending vmodel
  // transitions in the cluster's registry (the instance that went may have set them) are set
  // again here, so that this instance loads their targets and flips them. Only the live instance
  // with the lowest name that is not draining adopts (every instance is told), and claims keep a
  // model one load besides. Returns at once; the placement thread does it.
  void adopt(std::vector<std::string> models);
  std::uint64_t adopted() const;              // loads asked for by adopt(), here or elsewhere
  std::uint64_t transitions_resumed() const;  // vmodel transitions adopt() set again here

  // From now on this instance counts itself out of placement (it is draining): its misses are
  // placed on other instances. Its record says so too once republished; this takes effect at once.
  void set_draining();

  // A model to load elsewhere before this instance leaves.
  struct migrant {
    std::string model;
    std::uint64_t bytes = 0;
  };
  struct migration {
    std::size_t loaded = 0;     // loaded on another instance by the deadline
    std::size_t elsewhere = 0;  // another instance already held it or was loading it
    std::size_t failed = 0;     // the load there failed, or did not finish by the deadline
    std::size_t unplaced = 0;   // no other instance could take it
  };
  // Drain: places each of `models` (most valuable first) as a miss would be, with this instance
  // counted out, claims it, and asks the chosen instance to load it (peer_client::ensure); all at
  // once, waiting at most until `deadline`. A model another live instance holds is left alone.
  // Migration claims are on no lease: they outlive this instance, which is about to leave. Blocks
  // the caller (warmd's main thread at shutdown), never the placement thread.
  migration migrate(const std::vector<migrant>& models,
                    std::chrono::steady_clock::time_point deadline);

  // Copies (node/copies.hpp). `basis`: the model's copies change as read from etcd (its key's
  // mod_revision, 0 when absent) and the copies counted then. Both block the caller (the copy
  // scaler's thread), never the placement thread.
  struct copies_basis {
    std::int64_t revision = 0;
    std::uint32_t copies = 1;
  };
  // The model's last change of copies in etcd (nullopt: none) and its key's mod_revision.
  struct copies_read {
    std::optional<node::copies_change> last;
    std::int64_t revision = 0;
  };
  expected<copies_read> copies_of(const std::string& model);
  // Places `count` more copies of `model` (held here), each as a miss would be placed with the
  // instances that hold or load it passed over, and asks each chosen instance to load it
  // (peer_client::ensure; a failure there is logged and recorded by that instance). The first
  // claim also writes the model's copies change, compared against basis.revision: when another
  // holder changed the copies since, nothing is placed. Returns the copies asked for (a copy
  // already loading on another instance counts).
  std::size_t add_copies(const std::string& model, std::uint64_t bytes, std::size_t count,
                         const copies_basis& basis);
  // Records that this instance drops its copy of `model` (compared against basis.revision).
  // true: the caller unloads it; false: another holder changed the copies first, or etcd failed.
  bool drop_copy(const std::string& model, const copies_basis& basis);

  std::uint64_t placements() const;  // claims this instance won (copies' among them)
  std::uint64_t copies_dropped() const;
  std::uint64_t claims_lost() const;  // claims another instance won first

  struct impl;

 private:
  explicit placer(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::warmd
