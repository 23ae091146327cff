// The copy scaler of warmd's cluster mode (node/copies.hpp, docs/cluster.md): a thread that
// samples this instance's resident models' requests in flight four times a second and, for the
// models whose queueing calls for it, adds copies on other instances or drops the copy here.
//
// Contract:
//  - Decisions follow node::decide_copies, with the settle time counted from the model's last
//    change of copies in etcd; a change is made by the placer (add_copies, drop_copy), so holders
//    deciding at once make one change. A dropped copy is unloaded here (runtime::unload: requests
//    in flight finish; the next ones are forwarded to another copy).
//  - Never blocks the runtime or the placement thread; waits on etcd and the runtime's inspection
//    (2 s at most) on its own thread. etcd unreachable: nothing changes, the next tick tries again.
//  - The destructor joins the thread. The runtime, membership and placer it borrows must outlive
//  it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "node/copies.hpp"
#include "warm/error.hpp"

namespace warm {
class runtime;
}
namespace warm::node {
class membership;
}

namespace warm::warmd {

class placer;

class copy_scaler {
 public:
  struct options {
    node::copy_rule rule;
    std::chrono::milliseconds tick{250};
    runtime* rt = nullptr;                         // borrowed
    node::membership* membership = nullptr;        // borrowed
    placer* placing = nullptr;                     // borrowed
    std::function<void(const std::string&)> log;   // warnings; may be empty
    std::function<void(const std::string&)> note;  // each change; may be empty
  };
  // invalid_argument for a bad rule or a missing borrowed part. With rule.add_queue 0 the thread
  // is not started (copies off).
  static expected<std::unique_ptr<copy_scaler>> start(options o);
  ~copy_scaler();
  copy_scaler(const copy_scaler&) = delete;
  copy_scaler& operator=(const copy_scaler&) = delete;

  std::uint64_t added() const;    // copies asked for on other instances
  std::uint64_t dropped() const;  // copies dropped here

  struct impl;

 private:
  explicit copy_scaler(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::warmd
