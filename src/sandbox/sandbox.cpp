#include "sandbox/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

// Rights newer than the ABI 2 header Debian 12 ships (values from the kernel's uapi header).
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif

namespace warm::sandbox {

namespace {

constexpr std::uint64_t fs_read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr std::uint64_t fs_read_exec = fs_read | LANDLOCK_ACCESS_FS_EXECUTE;
// Everything but MAKE_CHAR and MAKE_BLOCK (see fs_rules::write).
constexpr std::uint64_t fs_write =
    fs_read | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM |
    LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
// The rights the kernel accepts on a rule whose object is not a directory (ACCESS_FILE in
// security/landlock/fs.c); anything else there is EINVAL.
constexpr std::uint64_t fs_file_rights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
    LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;

// The filesystem rights Landlock ABI `abi` knows.
std::uint64_t rights_of_abi(int abi) {
  std::uint64_t r = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return r;
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// Closes an fd on scope exit.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// Lowers one rlimit to soft/hard, never above the current hard limit. Async-signal-safe.
int set_limit(int resource, std::uint64_t soft, std::uint64_t hard) noexcept {
  rlimit cur{};
  if (::getrlimit(resource, &cur) != 0) return errno;
  rlim_t h = hard >= RLIM_INFINITY ? RLIM_INFINITY : static_cast<rlim_t>(hard);
  if (cur.rlim_max != RLIM_INFINITY && (h == RLIM_INFINITY || h > cur.rlim_max)) h = cur.rlim_max;
  rlim_t s = soft >= RLIM_INFINITY ? RLIM_INFINITY : static_cast<rlim_t>(soft);
  if (h != RLIM_INFINITY && (s == RLIM_INFINITY || s > h)) s = h;
  rlimit next{s, h};
  if (::setrlimit(resource, &next) != 0) return errno;
  return 0;
}

// "Argument 0 != value", compared as 64 bits (SCMP_A0 without its partial initializer).
scmp_arg_cmp arg0_ne(scmp_datum_t value) noexcept {
  return scmp_arg_cmp{0, SCMP_CMP_NE, value, 0};
}

// The number of threads of this process, or nullopt when /proc cannot tell.
std::optional<int> thread_count() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return std::nullopt;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace

// ---- Landlock ----

expected<landlock_ruleset> landlock_ruleset::build(const fs_rules& rules) {
  landlock_ruleset out;
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    if (errno == ENOSYS || errno == EOPNOTSUPP) return out;  // no Landlock: not available()
    return make_error(errc::unavailable,
                      "Landlock: querying the ABI version failed: " + errno_text(errno));
  }
  out.abi_ = static_cast<int>(abi);
  out.handled_ = rights_of_abi(out.abi_);

  landlock_ruleset_attr attr{};
  attr.handled_access_fs = out.handled_;
  long fd = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);  // O_CLOEXEC
  if (fd < 0) {
    return make_error(errc::unavailable,
                      "Landlock: creating a ruleset failed: " + errno_text(errno));
  }
  out.fd_ = static_cast<int>(fd);

  auto add = [&out](const std::string& path, std::uint64_t rights) -> expected<void> {
    fd_guard parent{::open(path.c_str(), O_PATH | O_CLOEXEC)};
    if (parent.fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        out.skipped_.push_back(path);
        return {};
      }
      return make_error(errc::invalid_argument,
                        "Landlock rule path '" + path + "': " + errno_text(errno));
    }
    struct stat st {};
    if (::fstat(parent.fd, &st) != 0) {
      return make_error(errc::invalid_argument,
                        "Landlock rule path '" + path + "': " + errno_text(errno));
    }
    landlock_path_beneath_attr beneath{};
    beneath.parent_fd = parent.fd;
    beneath.allowed_access = rights & out.handled_;
    if (!S_ISDIR(st.st_mode)) beneath.allowed_access &= fs_file_rights;
    if (::syscall(SYS_landlock_add_rule, out.fd_, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
      return make_error(errc::invalid_argument, "Landlock rule path '" + path +
                                                    "': adding it failed: " + errno_text(errno));
    }
    return {};
  };
  const std::pair<const std::vector<std::string>*, std::uint64_t> groups[] = {
      {&rules.read, fs_read}, {&rules.read_exec, fs_read_exec}, {&rules.write, fs_write}};
  for (const auto& [paths, rights] : groups) {
    for (const std::string& path : *paths) {
      if (auto r = add(path, rights); !r) return std::move(r).error();
    }
  }
  return out;
}

landlock_ruleset::landlock_ruleset(landlock_ruleset&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      abi_(std::exchange(other.abi_, 0)),
      handled_(std::exchange(other.handled_, 0)),
      skipped_(std::move(other.skipped_)) {}

landlock_ruleset& landlock_ruleset::operator=(landlock_ruleset&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    abi_ = std::exchange(other.abi_, 0);
    handled_ = std::exchange(other.handled_, 0);
    skipped_ = std::move(other.skipped_);
  }
  return *this;
}

landlock_ruleset::~landlock_ruleset() {
  if (fd_ >= 0) ::close(fd_);
}

int restrict_self(const landlock_ruleset& ruleset) noexcept {
  if (!ruleset.available()) return ENOSYS;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::syscall(SYS_landlock_restrict_self, ruleset.fd(), 0) != 0) return errno;
  return 0;
}

// ---- rlimits ----

int apply_limits(const limits& l) noexcept {
  if (l.address_space != 0) {
    if (int e = set_limit(RLIMIT_AS, l.address_space, l.address_space)) return e;
  }
  if (l.cpu_seconds != 0) {
    // The hard limit 5 s later: SIGXCPU (catchable, default kills) first, then SIGKILL.
    std::uint64_t hard = l.cpu_seconds + 5 < l.cpu_seconds ? l.cpu_seconds : l.cpu_seconds + 5;
    if (int e = set_limit(RLIMIT_CPU, l.cpu_seconds, hard)) return e;
  }
  if (l.open_files != 0) {
    if (int e = set_limit(RLIMIT_NOFILE, l.open_files, l.open_files)) return e;
  }
  if (l.no_core) {
    if (int e = set_limit(RLIMIT_CORE, 0, 0)) return e;
  }
  return 0;
}

// ---- users ----

expected<identity> find_user(const std::string& name) {
  long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::size_t size = hint > 0 ? static_cast<std::size_t>(hint) : 16384;
  for (;;) {
    std::unique_ptr<char[]> buf(new char[size]);
    passwd pw{};
    passwd* found = nullptr;
    int rc = ::getpwnam_r(name.c_str(), &pw, buf.get(), size, &found);
    if (rc == ERANGE && size < (1u << 20)) {
      size *= 2;
      continue;
    }
    if (rc != 0) {
      return make_error(errc::unavailable,
                        "looking up user '" + name + "' failed: " + errno_text(rc));
    }
    if (found == nullptr) return make_error(errc::not_found, "no user '" + name + "'");
    return identity{pw.pw_uid, pw.pw_gid, pw.pw_name};
  }
}

int become(const identity& who, bool keep_read_search) noexcept {
  if (who.uid == 0 || who.gid == 0) return EINVAL;
  // Keeps the permitted capabilities across the uid change, to keep one of them below.
  if (keep_read_search && ::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return errno;
  if (::setgroups(0, nullptr) != 0) return errno;
  if (::setresgid(who.gid, who.gid, who.gid) != 0) return errno;
  if (::setresuid(who.uid, who.uid, who.uid) != 0) return errno;
  if (keep_read_search) {
    ::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    data[0].effective = data[0].permitted = 1u << CAP_DAC_READ_SEARCH;  // every other one dropped
    if (::syscall(SYS_capset, &header, data) != 0) return errno;
  }
  uid_t ru = 0, eu = 0, su = 0;
  gid_t rg = 0, eg = 0, sg = 0;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0) return errno;
  if (ru != who.uid || eu != who.uid || su != who.uid) return EPERM;
  if (rg != who.gid || eg != who.gid || sg != who.gid) return EPERM;
  if (::getgroups(0, nullptr) != 0) return EPERM;
  // Root must be gone for good: regaining it has to fail.
  if (::setuid(0) == 0 || ::setgid(0) == 0) return EPERM;
  return 0;
}

// ---- seccomp ----

expected<void> apply_seccomp(const syscall_rules& rules) {
  if (!rules.deny_exec && !rules.deny_network && !rules.deny_debug && !rules.deny_admin) return {};
  std::unique_ptr<void, void (*)(scmp_filter_ctx)> ctx(seccomp_init(SCMP_ACT_ALLOW),
                                                       seccomp_release);
  if (!ctx) return make_error(errc::unavailable, "seccomp: seccomp_init failed");
  auto fail = [](const char* what, int rc) {
    return make_error(errc::unavailable, std::string("seccomp: ") + what + ": " + errno_text(-rc));
  };
  // Every thread gets the filter, or none does (seccomp_load fails).
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1); rc != 0) {
    return fail("setting TSYNC", rc);
  }
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 1); rc != 0) {
    return fail("setting NO_NEW_PRIVS", rc);
  }
  const auto deny = SCMP_ACT_ERRNO(EPERM);
  struct entry {
    const char* name;
    int nr;
  };
  auto deny_all = [&](std::initializer_list<entry> calls) -> expected<void> {
    for (const entry& c : calls) {
      if (int rc = seccomp_rule_add(ctx.get(), deny, c.nr, 0); rc != 0) return fail(c.name, rc);
    }
    return {};
  };
#define WARM_SYSCALL(n) \
  entry {               \
#n, SYS_##n         \
  }
  if (rules.deny_exec) {
    if (auto r = deny_all({WARM_SYSCALL(execve), WARM_SYSCALL(execveat)}); !r) return r;
  }
  if (rules.deny_network) {
    // Compared as 64-bit values: a domain with garbage in the upper half is denied (fail-safe).
    for (entry c : {WARM_SYSCALL(socket), WARM_SYSCALL(socketpair)}) {
      if (int rc = seccomp_rule_add(ctx.get(), deny, c.nr, 1, arg0_ne(AF_UNIX)); rc != 0) {
        return fail(c.name, rc);
      }
    }
  }
  if (rules.deny_debug) {
    if (auto r = deny_all({WARM_SYSCALL(ptrace), WARM_SYSCALL(process_vm_readv),
                           WARM_SYSCALL(process_vm_writev), WARM_SYSCALL(perf_event_open),
                           WARM_SYSCALL(pidfd_getfd),
                           // Opening by file handle skips the path walk (and needs the
                           // read-search capability a runtime may keep).
                           WARM_SYSCALL(open_by_handle_at), WARM_SYSCALL(name_to_handle_at)});
        !r) {
      return r;
    }
  }
  if (rules.deny_admin) {
    if (auto r = deny_all(
            {// Mounts, old API and the new one (which would bypass a deny of mount alone).
             WARM_SYSCALL(mount), WARM_SYSCALL(umount2), WARM_SYSCALL(pivot_root),
             WARM_SYSCALL(chroot), WARM_SYSCALL(fsopen), WARM_SYSCALL(fsconfig),
             WARM_SYSCALL(fsmount), WARM_SYSCALL(fspick), WARM_SYSCALL(move_mount),
             WARM_SYSCALL(open_tree), WARM_SYSCALL(mount_setattr),
             // Namespaces, BPF, kexec, kernel modules.
             WARM_SYSCALL(setns), WARM_SYSCALL(unshare), WARM_SYSCALL(bpf),
             WARM_SYSCALL(kexec_load), WARM_SYSCALL(kexec_file_load), WARM_SYSCALL(init_module),
             WARM_SYSCALL(finit_module), WARM_SYSCALL(delete_module),
             // Keyrings, userfaultfd, io_uring (its own path to sockets and files).
             WARM_SYSCALL(keyctl), WARM_SYSCALL(add_key), WARM_SYSCALL(request_key),
             WARM_SYSCALL(userfaultfd), WARM_SYSCALL(io_uring_setup), WARM_SYSCALL(io_uring_enter),
             WARM_SYSCALL(io_uring_register),
             // The machine: swap, reboot, clocks, accounting, quotas.
             WARM_SYSCALL(swapon), WARM_SYSCALL(swapoff), WARM_SYSCALL(reboot),
             WARM_SYSCALL(settimeofday), WARM_SYSCALL(clock_settime), WARM_SYSCALL(acct),
             WARM_SYSCALL(quotactl), WARM_SYSCALL(quotactl_fd)});
        !r) {
      return r;
    }
    // personality: only the read-only query is allowed.
    if (int rc = seccomp_rule_add(ctx.get(), deny, SYS_personality, 1, arg0_ne(0xffffffffULL));
        rc != 0) {
      return fail("personality", rc);
    }
  }
#undef WARM_SYSCALL
  if (int rc = seccomp_load(ctx.get()); rc != 0) return fail("loading the filter", rc);
  return {};
}

// ---- system paths ----

std::vector<std::string> system_read_exec_paths() {
  return {
      // Programs, shared libraries (glibc, libstdc++, OpenBLAS, libgomp, libtorch), the loader,
      // /usr/share (zoneinfo, locales). On merged-/usr systems the next five are symlinks into
      // /usr and their rules land on the same directories.
      "/usr",
      "/lib",    // the dynamic loader's default search path
      "/lib64",  // /lib64/ld-linux-x86-64.so.2, the interpreter named in every ELF binary
      "/lib32",  // 32-bit libraries (multilib systems)
      "/bin",
      "/sbin",
      // The dynamic loader: the library cache and its configuration (ldconfig's inputs, read by
      // dlopen's fallbacks). /etc/ld.so.preload is left out on purpose: glibc treats an
      // unreadable one as absent.
      "/etc/ld.so.cache",
      "/etc/ld.so.conf",
      "/etc/ld.so.conf.d",
      // localtime() (log timestamps); the zone files themselves are under /usr/share/zoneinfo.
      "/etc/localtime",
      // Devices every program may expect: /dev/null for redirections, /dev/zero for some
      // allocators' mappings, /dev/urandom for std::random_device and libtorch's seeds
      // (getrandom(2) needs no path).
      "/dev/null",
      "/dev/zero",
      "/dev/urandom",
      // CPU counts and topology: glibc's sysconf(_SC_NPROCESSORS_*) reads .../online and
      // .../possible; libgomp, OpenBLAS and libtorch's cpuinfo read the cpuN/topology and
      // cache directories to size thread pools and blocks.
      "/sys/devices/system/cpu",
      // NUMA nodes: OpenBLAS, libgomp and libtorch check the node layout at start.
      "/sys/devices/system/node",
      // CPU model and flags: libtorch's cpuinfo, OpenBLAS's fallback core detection.
      "/proc/cpuinfo",
      // glibc's malloc reads it to decide how to give memory back to the kernel.
      "/proc/sys/vm/overcommit_memory",
  };
}

// ---- all at once ----

// A build with AddressSanitizer or ThreadSanitizer: its runtime reserves terabytes of address
// space for shadow memory (an address-space limit would fail every allocation), ThreadSanitizer
// runs a thread of its own, and LeakSanitizer's check at exit stops the threads with ptrace.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitizer_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitizer_build = true;
#else
constexpr bool sanitizer_build = false;
#endif
#else
constexpr bool sanitizer_build = false;
#endif
// ThreadSanitizer's runtime starts a thread of its own before main.
#if defined(__SANITIZE_THREAD__)
constexpr int own_threads = 2;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int own_threads = 2;
#else
constexpr int own_threads = 1;
#endif
#else
constexpr int own_threads = 1;
#endif

expected<applied> sandbox_self(const self_policy& requested) {
  applied out;
  self_policy policy = requested;
  if (sanitizer_build) {
    if (policy.rlimits.address_space)
      out.notes.push_back("a sanitizer build: address space not limited");
    policy.rlimits.address_space = 0;
    if (policy.syscalls.deny_debug)
      out.notes.push_back("a sanitizer build: ptrace not denied (leak checks use it)");
    policy.syscalls.deny_debug = false;
    policy.files.read.push_back("/proc/self");  // this process's: its maps and threads, for reports
    out.notes.push_back("a sanitizer build: /proc/self readable");
  }
  if (auto n = thread_count(); n && *n > own_threads) {
    return make_error(errc::invalid_argument,
                      "sandbox_self must run before the process starts threads (it has " +
                          std::to_string(*n) + ")");
  }

  // Prepare: everything that reads files or allocates much, while nothing is restricted yet.
  const bool root = ::geteuid() == 0;
  std::optional<identity> who;
  if (!policy.user.empty()) {
    if (root) {
      auto found = find_user(policy.user);
      if (!found) return std::move(found).error();
      who = std::move(*found);
    } else {
      out.notes.push_back("not running as root: user '" + policy.user + "' not changed");
    }
  }
  auto ruleset = landlock_ruleset::build(policy.files);
  if (!ruleset) return std::move(ruleset).error();

  // Apply, in order.
  if (int e = apply_limits(policy.rlimits)) {
    return make_error(errc::unavailable, "setting resource limits failed: " + errno_text(e));
  }
  if (who) {
    if (int e = become(*who, policy.keep_read_search)) {
      return make_error(errc::unavailable,
                        "becoming user '" + who->name + "' failed: " + errno_text(e));
    }
    out.user_changed = true;
  }
  if (ruleset->available()) {
    if (int e = restrict_self(*ruleset)) {
      return make_error(errc::unavailable, "Landlock: restricting failed: " + errno_text(e));
    }
    out.landlock = true;
    out.landlock_abi = ruleset->abi();
    for (const std::string& p : ruleset->skipped()) {
      out.notes.push_back("Landlock: no such path, rule skipped: " + p);
    }
  } else {
    out.notes.push_back("Landlock unavailable: files not confined");
  }
  if (auto r = apply_seccomp(policy.syscalls); !r) return std::move(r).error();
  const syscall_rules& s = policy.syscalls;
  out.seccomp = s.deny_exec || s.deny_network || s.deny_debug || s.deny_admin;
  return out;
}

}  // namespace warm::sandbox
