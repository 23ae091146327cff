// The runtime warm-mmesh --exec starts: `/bin/sh -c 'exec COMMAND'` in a private directory of its
// own (mkdtemp, 0700), told where to listen by WARM_GRPC_ADDRESS=unix:DIR/runtime.sock, killed by
// the kernel when the bridge dies (PR_SET_PDEATHSIG(SIGKILL)), its stdout and stderr the
// bridge's. Not thread-safe: owned and used by the bridge's main (event-loop) thread, the thread
// that started it (the death signal follows that thread).
#pragma once

#include <kj/common.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "confinement.hpp"
#include "warm/error.hpp"

namespace warm::mmesh {

class runtime_child {
 public:
  // Makes the directory and starts COMMAND there with this process's environment, less
  // WARM_RUNTIME_FD (the runtime speaks gRPC, not warm's interface), plus WARM_GRPC_ADDRESS.
  // Call it before any other thread exists (fork). Signals are unblocked in the child.
  // With confine.enabled, the child confines itself before it execs (confinement.hpp): the
  // repositories of WARM_RUNTIME_REPOS read-only, the directory its only writable place (and
  // TMPDIR); a confinement that cannot be applied ends the child with a message on stderr and
  // exit status 126, never an unconfined runtime. Errors: the directory, the plan (no such user).
  static expected<std::unique_ptr<runtime_child>> start(const std::string& command,
                                                        const confinement_options& confine);
  // Removes the directory, then stops the child (stop()).
  ~runtime_child();
  runtime_child(const runtime_child&) = delete;
  runtime_child& operator=(const runtime_child&) = delete;

  // The address the runtime listens on: "unix:DIR/runtime.sock".
  const std::string& address() const { return address_; }
  // The child's pid while it has not been reaped; kj's onChildExit() takes this and clears it
  // once it has waited for the child, so a reaped pid is never signalled.
  kj::Maybe<pid_t>& pid() { return pid_; }
  // Resident bytes of the child now (/proc/PID/statm); 0 when it cannot be read.
  std::uint64_t rss_bytes() const;
  // SIGTERM, up to `grace_ms` for it to exit, then SIGKILL; reaps it. Nothing once reaped.
  void stop(int grace_ms = 150);

 private:
  runtime_child() = default;

  std::string dir_;
  std::string address_;
  kj::Maybe<pid_t> pid_;
};

// "exited with status N", "was killed by signal S (SIGSEGV)", from a wait(2) status.
std::string describe_wait_status(int status);

// Ends this process as the child ended: exit(N), or the same signal raised with its default
// action (core dumps off: the bridge's core is no use).
[[noreturn]] void end_like(int wait_status);

}  // namespace warm::mmesh
