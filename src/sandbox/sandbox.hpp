// Sandboxing model runtimes: the processes that run untrusted TorchScript model code.
//
// Four mechanisms, each usable alone, in two kinds of functions:
//  - Prepared in the PARENT (allocate, may fail with a message): landlock_ruleset::build,
//    find_user. They never restrict the calling process.
//  - ASYNC-SIGNAL-SAFE, for a forked child before execve (plain syscalls, no allocation, no
//    locks, result as an errno value): restrict_self, apply_limits, become.
// And two a process applies to ITSELF, from ordinary code: apply_seccomp (libseccomp allocates)
// and sandbox_self, which does everything in one call at the start of main.
//
// Filesystem: Landlock (kernel 5.13+). Every access right the kernel knows is handled, so what a
// rule does not grant is denied, including to root. Syscalls: a seccomp deny list (EPERM). Root:
// dropped to an unprivileged user, checked to be unrecoverable. Resources: rlimits.
// Linux only. Includes nothing of warm's but warm/error.hpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::sandbox {

// Paths and what a sandboxed process may do beneath them. A path names a directory (the rule
// covers everything beneath it) or a single file. Paths are resolved when the ruleset is built
// (symlinks followed: a rule on /lib lands on /usr/lib where /lib -> usr/lib).
struct fs_rules {
  // Read files; list directories.
  std::vector<std::string> read;
  // Read, list and execute (binaries, shared libraries: mmap(PROT_EXEC) needs EXECUTE).
  std::vector<std::string> read_exec;
  // Read, list, write, truncate, create, remove and rename files, directories, symlinks, fifos
  // and sockets, ioctl on devices. Never creating device nodes (MAKE_CHAR, MAKE_BLOCK): a root
  // process could otherwise mknod the disk inside a writable directory and read it there.
  std::vector<std::string> write;
};

// The owner of a Landlock ruleset fd, built in the parent and applied in a child with
// restrict_self (or by sandbox_self). Move-only; closes the fd on destruction. The fd is
// O_CLOEXEC: a child that needs it after execve must restrict itself before execve.
//
// States: available() (a ruleset fd is held) or not (the kernel has no Landlock, or a
// moved-from object). Immutable once built; const members may be called from any thread.
class landlock_ruleset {
 public:
  // Builds a ruleset that handles every filesystem right the running kernel's ABI knows
  // (EXECUTE..MAKE_SYM from ABI 1, REFER from 2, TRUNCATE from 3, IOCTL_DEV from 5) and
  // grants `rules`. Contract:
  //  1. Does not restrict the calling process.
  //  2. A path that does not exist (ENOENT, ENOTDIR) is skipped and listed in skipped(), not
  //     an error. Any other failure to open a path is an error naming it.
  //  3. A rule on a non-directory carries only file rights (READ_FILE, EXECUTE, WRITE_FILE,
  //     TRUNCATE, IOCTL_DEV): directory rights are masked off, as the kernel would refuse them.
  //  4. Without Landlock in the kernel (ENOSYS, EOPNOTSUPP: not built or disabled at boot),
  //     returns an object whose available() is false; callers warn and go on.
  static expected<landlock_ruleset> build(const fs_rules& rules);

  landlock_ruleset() = default;  // not available()
  landlock_ruleset(landlock_ruleset&& other) noexcept;
  landlock_ruleset& operator=(landlock_ruleset&& other) noexcept;
  landlock_ruleset(const landlock_ruleset&) = delete;
  landlock_ruleset& operator=(const landlock_ruleset&) = delete;
  ~landlock_ruleset();

  // Whether a ruleset fd is held (the kernel has Landlock).
  bool available() const noexcept { return fd_ >= 0; }
  // The ruleset fd, or -1. Still owned by this object.
  int fd() const noexcept { return fd_; }
  // The kernel's Landlock ABI version (0 without Landlock).
  int abi() const noexcept { return abi_; }
  // The rights the ruleset handles (denied unless a rule grants them), a LANDLOCK_ACCESS_FS_* mask.
  std::uint64_t handled() const noexcept { return handled_; }
  // The rule paths that did not exist, in the order given.
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

 private:
  int fd_ = -1;
  int abi_ = 0;
  std::uint64_t handled_ = 0;
  std::vector<std::string> skipped_;
};

// Confines the calling thread, and every thread and program it later creates or execs, to
// `ruleset`: sets PR_SET_NO_NEW_PRIVS, then landlock_restrict_self. Irrevocable.
// ASYNC-SIGNAL-SAFE (two syscalls). Returns 0, or an errno value (ENOSYS when
// !ruleset.available(): callers that accept running unconfined skip the call after warning).
// Only the calling thread is restricted: call it in a single-threaded process (a forked child,
// or main before it starts threads).
int restrict_self(const landlock_ruleset& ruleset) noexcept;

// Resource limits; 0 leaves a limit unchanged.
struct limits {
  std::uint64_t address_space = 0;  // RLIMIT_AS, bytes (soft = hard)
  std::uint64_t cpu_seconds = 0;    // RLIMIT_CPU: SIGXCPU at this, SIGKILL 5 s later
  std::uint64_t open_files = 0;     // RLIMIT_NOFILE (soft = hard)
  bool no_core = true;              // RLIMIT_CORE 0: a crash dumps no model memory to disk
};

// Applies `l` to the calling process with setrlimit. A limit never rises above the current
// hard limit (an unprivileged process could not raise it). ASYNC-SIGNAL-SAFE. Returns 0 or the
// errno value of the first failing call (later limits are then not applied).
int apply_limits(const limits& l) noexcept;

// A user to run as, looked up in the parent.
struct identity {
  uid_t uid = 0;
  gid_t gid = 0;  // the user's primary group
  std::string name;
};

// Looks `name` up with getpwnam_r (NSS: may read /etc/passwd, so call it before Landlock).
// not_found naming the user when there is no such user. Thread-safe.
expected<identity> find_user(const std::string& name);

// Drops the calling process to `who`: setgroups(0, nullptr), setresgid(gid x3), setresuid(uid x3),
// then checks that the real, effective and saved ids all changed and that setuid(0) and
// setgid(0) now fail. With `keep_read_search`, the process keeps CAP_DAC_READ_SEARCH alone (it
// may read any file the permission bits would refuse it: a repository readable by root only),
// which is meant to go with a Landlock ruleset that confines what it reads, and with
// apply_seccomp's deny_debug (which denies opening by file handle). ASYNC-SIGNAL-SAFE in a
// single-threaded process (a forked child; glibc's id calls act on every thread of the
// process). Returns 0, an errno value of a failing call, EINVAL when who.uid is 0 (that is no
// drop), or EPERM when root could be regained.
int become(const identity& who, bool keep_read_search = false) noexcept;

// Syscalls to deny (EPERM). Each group is on by default.
struct syscall_rules {
  bool deny_exec = true;     // execve, execveat: the process runs no other program
  bool deny_network = true;  // socket and socketpair for every domain but AF_UNIX (no TCP/UDP)
  // ptrace, process_vm_readv/writev, perf_event_open, pidfd_getfd: no reading other processes
  bool deny_debug = true;
  // Mounts (old and new API), namespaces, chroot, bpf, kexec, kernel modules, keyrings,
  // userfaultfd, io_uring, swap, reboot, clocks, acct, quotactl, and personality (all but the
  // read-only query personality(0xffffffff)).
  bool deny_admin = true;
};

// Installs a seccomp filter on the CALLING PROCESS (all its threads: SCMP_FLTATR_CTL_TSYNC)
// that answers EPERM to the syscalls `rules` denies and allows the rest; sets
// PR_SET_NO_NEW_PRIVS (SCMP_FLTATR_CTL_NNP). Irrevocable, inherited by children. Native
// architecture only: a syscall of another ABI (i386 `int 0x80`, x32) kills the process
// (SCMP_FLTATR_ACT_BADARCH left at its default, KILL). With every group off, installs nothing.
// Not async-signal-safe (libseccomp allocates). unavailable when the kernel refuses the filter.
expected<void> apply_seccomp(const syscall_rules& rules);

// What a dynamically linked program (glibc, libstdc++, OpenBLAS, libgomp, libtorch) needs to
// read and execute to start and run: system directories, the loader's cache, a few devices,
// /sys and /proc files. Never /etc as a whole, /root, /home, /tmp or /proc as a whole. See
// sandbox.cpp for why each is there. Meant for fs_rules::read_exec.
std::vector<std::string> system_read_exec_paths();

// A whole sandbox for a process confining itself.
struct self_policy {
  fs_rules files;                 // Landlock rules (add system_read_exec_paths() to read_exec)
  limits rlimits;                 // resource limits
  syscall_rules syscalls;         // seccomp deny list
  std::string user;               // user to become when running as root; empty: keep
  bool keep_read_search = false;  // with user: keep CAP_DAC_READ_SEARCH (see become)
};

// What sandbox_self did.
struct applied {
  bool landlock = false;  // files confined
  int landlock_abi = 0;
  bool seccomp = false;            // a seccomp filter installed
  bool user_changed = false;       // root dropped to policy.user
  std::vector<std::string> notes;  // what was not done and why, for the caller to log
};

// Sandboxes the calling process in one call, at the very start of main. Prepares first (looks
// the user up, builds the Landlock ruleset), then applies in order: limits, user (only when
// running as root and policy.user is set), Landlock, seccomp. Contract:
//  1. The process must be single-threaded (Landlock restricts only the calling thread):
//     invalid_argument otherwise, before anything is applied.
//  2. Without Landlock in the kernel, goes on and says so in notes ("Landlock unavailable:
//     files not confined"); a user given while not root is noted and ignored.
//  3. Any other failure is an error; what was applied before it stays applied (irrevocable),
//     so a caller must exit on error rather than run unconfined.
//  4. In a build with AddressSanitizer or ThreadSanitizer (tests), the address space is not
//     limited, ptrace is not denied, /proc/self is readable (the sanitizers' reports and leak
//     check read it) and ThreadSanitizer's own thread is allowed; notes say so.
expected<applied> sandbox_self(const self_policy& policy);

}  // namespace warm::sandbox
