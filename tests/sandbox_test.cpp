// sandbox: Landlock, rlimits, dropping root, seccomp and sandbox_self against the real kernel.
// Every restriction is applied in a forked child that tries things and reports by exit code
// (0: all as expected; otherwise the number of the first check that failed); the parent only
// builds rulesets, looks users up and asserts the child's wait status. The parent never
// restricts itself (checked at the end of the Landlock and seccomp cases).
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "sandbox/sandbox.hpp"

namespace sb = warm::sandbox;
namespace fs = std::filesystem;

namespace {

// The calling process's mapped address space (/proc/self/statm's first field), in bytes.
std::uint64_t mapped_bytes() {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// "exit N" or "signal N" for a wait status, so a failed CHECK says what the child did.
std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs `body` in a forked child and returns its wait status. The child exits with body's result
// (a throw is 99) without running atexit handlers or flushing the parent's buffers; a signal
// kills it as it would kill a program.
int in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) FAIL("fork failed");
  if (pid == 0) {
    // Catch2's fatal-signal handlers would report the child's expected deaths as failures.
    for (int sig : {SIGSEGV, SIGSYS, SIGILL, SIGFPE, SIGABRT, SIGBUS, SIGTERM, SIGINT}) {
      ::signal(sig, SIG_DFL);
    }
    int code = 99;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Whether opening `path` with `flags` fails with `err`.
bool open_fails(const std::string& path, int flags, int err) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return false;
  }
  return errno == err;
}

bool can_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char c;
  bool ok = ::read(fd, &c, 1) >= 0;
  ::close(fd);
  return ok;
}

bool can_list(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return false;
  ::closedir(d);
  return true;
}

void write_file(const fs::path& p, const std::string& text, mode_t mode = 0644) {
  FILE* f = std::fopen(p.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
  ::chmod(p.c_str(), mode);
}

// A temporary tree: root/A/file, root/A/other, root/B/file, all readable by everyone.
struct tree {
  tree() {
    char templ[] = "/tmp/warm_sandbox_XXXXXX";
    REQUIRE(::mkdtemp(templ) != nullptr);
    root = templ;
    ::chmod(root.c_str(), 0755);  // so a dropped user reaches the files (their modes decide)
    fs::create_directory(a());
    fs::create_directory(b());
    write_file(a() / "file", "a");
    write_file(a() / "other", "o");
    write_file(b() / "file", "b");
  }
  ~tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  fs::path a() const { return root / "A"; }
  fs::path b() const { return root / "B"; }
  fs::path root;
};

sb::landlock_ruleset build(const sb::fs_rules& rules) {
  auto r = sb::landlock_ruleset::build(rules);
  if (!r) FAIL(r.error().to_string());
  REQUIRE(r->available());  // this kernel has Landlock (ABI 7 on the CI machine)
  return std::move(*r);
}

}  // namespace

TEST_CASE("landlock: a readable directory, and nothing else", "[sandbox][landlock]") {
  tree t;
  sb::fs_rules rules;
  rules.read = {t.a().string()};
  auto ruleset = build(rules);
  CHECK(ruleset.abi() >= 1);
  CHECK(ruleset.skipped().empty());
  const std::string a = t.a().string(), b = t.b().string();

  int st = in_child([&] {
    if (sb::restrict_self(ruleset) != 0) return 1;
    if (!can_read(a + "/file")) return 2;
    if (!can_list(a)) return 3;
    if (!open_fails(b + "/file", O_RDONLY, EACCES)) return 4;  // sibling directory
    if (!open_fails(a + "/new", O_WRONLY | O_CREAT, EACCES)) return 5;
    if (!open_fails(a + "/file", O_WRONLY, EACCES)) return 6;
    if (::unlink((a + "/file").c_str()) == 0 || errno != EACCES) return 7;
    if (::mkdir((a + "/dir").c_str(), 0755) == 0 || errno != EACCES) return 8;
    if (::truncate((a + "/file").c_str(), 0) == 0 || errno != EACCES) return 9;
    if (!open_fails("/etc/shadow", O_RDONLY, EACCES)) return 10;  // root, yet refused
    if (!open_fails("/etc/hostname", O_RDONLY, EACCES)) return 11;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
  // The parent was not restricted, and the child changed nothing.
  CHECK(can_read(t.b() / "file"));
  CHECK(fs::exists(t.a() / "file"));
  CHECK(!fs::exists(t.a() / "new"));
  CHECK(fs::file_size(t.a() / "file") == 1);
}

TEST_CASE("landlock: a writable directory", "[sandbox][landlock]") {
  tree t;
  sb::fs_rules rules;
  rules.write = {t.a().string()};
  auto ruleset = build(rules);
  const std::string a = t.a().string(), b = t.b().string();

  int st = in_child([&] {
    if (sb::restrict_self(ruleset) != 0) return 1;
    int fd = ::open((a + "/new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return 2;
    if (::write(fd, "x", 1) != 1) return 3;
    ::close(fd);
    if (::mkdir((a + "/dir").c_str(), 0755) != 0) return 4;
    if (::rename((a + "/other").c_str(), (a + "/dir/moved").c_str()) != 0) return 5;
    if (::truncate((a + "/file").c_str(), 0) != 0) return 6;
    if (::unlink((a + "/dir/moved").c_str()) != 0) return 7;
    if (!open_fails(b + "/file", O_RDONLY, EACCES)) return 8;
    if (!open_fails(b + "/new", O_WRONLY | O_CREAT, EACCES)) return 9;
    // No device nodes, even as root: mknod of a block device in a writable directory.
    if (::mknod((a + "/disk").c_str(), S_IFBLK | 0600, makedev(8, 0)) == 0) return 10;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
  CHECK(fs::exists(t.a() / "new"));
  CHECK(fs::is_directory(t.a() / "dir"));
  CHECK(!fs::exists(t.a() / "disk"));
}

TEST_CASE("landlock: paths that do not exist are skipped", "[sandbox][landlock]") {
  tree t;
  sb::fs_rules rules;
  const std::string missing = (t.root / "missing").string();
  const std::string under_file = (t.a() / "file" / "x").string();  // ENOTDIR
  rules.read = {t.a().string(), missing};
  rules.write = {under_file};
  auto ruleset = build(rules);
  CHECK(ruleset.skipped() == std::vector<std::string>{missing, under_file});

  const std::string a = t.a().string();
  int st = in_child([&] {
    if (sb::restrict_self(ruleset) != 0) return 1;
    return can_read(a + "/file") ? 0 : 2;
  });
  CHECK(describe(st) == "exit 0");
}

TEST_CASE("landlock: a rule on a single file", "[sandbox][landlock]") {
  tree t;
  sb::fs_rules rules;
  rules.read = {(t.a() / "file").string()};   // directory rights masked off (else EINVAL)
  rules.write = {(t.b() / "file").string()};  // likewise: no MAKE_*, REMOVE_*, REFER
  rules.read_exec = {"/usr/bin/true"};
  auto ruleset = build(rules);
  CHECK(ruleset.skipped().empty());
  const std::string a = t.a().string(), b = t.b().string();

  int st = in_child([&] {
    if (sb::restrict_self(ruleset) != 0) return 1;
    if (!can_read(a + "/file")) return 2;
    if (!open_fails(a + "/other", O_RDONLY, EACCES)) return 3;  // its neighbour
    if (can_list(a)) return 4;
    if (!open_fails(a + "/file", O_WRONLY, EACCES)) return 5;  // read only
    int fd = ::open((b + "/file").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return 6;
    ::close(fd);
    if (!open_fails(b + "/new", O_WRONLY | O_CREAT, EACCES)) return 7;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
}

TEST_CASE("landlock: execve needs the system paths", "[sandbox][landlock]") {
  tree t;
  SECTION("allowed with system_read_exec_paths") {
    sb::fs_rules rules;
    rules.read_exec = sb::system_read_exec_paths();
    auto ruleset = build(rules);
    int st = in_child([&] {
      if (sb::restrict_self(ruleset) != 0) return 1;
      char* const argv[] = {const_cast<char*>("true"), nullptr};
      char* const envp[] = {nullptr};
      ::execve("/bin/true", argv, envp);
      return 100 + errno;
    });
    CHECK(describe(st) == "exit 0");  // /bin/true itself
  }
  SECTION("refused without them") {
    sb::fs_rules rules;
    rules.read = {t.a().string()};
    auto ruleset = build(rules);
    int st = in_child([&] {
      if (sb::restrict_self(ruleset) != 0) return 1;
      char* const argv[] = {const_cast<char*>("true"), nullptr};
      char* const envp[] = {nullptr};
      ::execve("/bin/true", argv, envp);
      return errno == EACCES ? 42 : 100 + errno;
    });
    CHECK(describe(st) == "exit 42");
  }
  SECTION("refused when /usr is only readable") {
    sb::fs_rules rules;
    rules.read = sb::system_read_exec_paths();
    auto ruleset = build(rules);
    int st = in_child([&] {
      if (sb::restrict_self(ruleset) != 0) return 1;
      char* const argv[] = {const_cast<char*>("true"), nullptr};
      char* const envp[] = {nullptr};
      ::execve("/bin/true", argv, envp);
      return errno == EACCES ? 42 : 100 + errno;
    });
    CHECK(describe(st) == "exit 42");
  }
}

TEST_CASE("limits: address space, open files, core dumps", "[sandbox][limits]") {
#if defined(__SANITIZE_ADDRESS__)
  WARN("skipped under AddressSanitizer (its shadow memory needs terabytes of address space)");
#else
  int st = in_child([] {
    // 256 MiB beyond what the process already maps (the test program's own libraries and their
    // buffers count against the limit too).
    sb::limits l;
    l.address_space = mapped_bytes() + (256ull << 20);
    l.open_files = 32;
    if (sb::apply_limits(l) != 0) return 1;
    void* volatile big = std::malloc(1ull << 30);
    if (big != nullptr) return 2;
    void* volatile small = std::malloc(1 << 20);  // smaller allocations still work
    if (small == nullptr) return 3;
    std::free(small);
    rlimit core{};
    if (::getrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_cur != 0 || core.rlim_max != 0) return 4;
    for (int i = 0; i < 64; ++i) {
      if (::open("/dev/null", O_RDONLY) < 0) return errno == EMFILE ? 0 : 5;
    }
    return 6;  // 64 fds under a limit of 32
  });
  CHECK(describe(st) == "exit 0");
#endif
}

TEST_CASE("limits: cpu_seconds ends a busy loop with SIGXCPU", "[sandbox][limits]") {
  int st = in_child([] {
    sb::limits l;
    l.cpu_seconds = 1;
    if (sb::apply_limits(l) != 0) return 1;
    rlimit cpu{};
    ::getrlimit(RLIMIT_CPU, &cpu);
    if (cpu.rlim_cur != 1 || cpu.rlim_max != 6) return 2;
    ::alarm(10);  // a wall-clock guard: SIGALRM, not a hung test, if the limit did nothing
    for (volatile std::uint64_t i = 0;; i = i + 1) {
    }
  });
  CHECK(describe(st) == "signal " + std::to_string(SIGXCPU));
}

TEST_CASE("become: dropping root to nobody is for good", "[sandbox][user]") {
  if (::geteuid() != 0) {
    WARN("skipped: not running as root");
    return;
  }
  auto nobody = sb::find_user("nobody");
  REQUIRE(nobody);
  CHECK(nobody->uid != 0);
  CHECK(nobody->name == "nobody");
  auto unknown = sb::find_user("no-such-user-warm");
  REQUIRE(!unknown);
  CHECK(unknown.error().code == warm::errc::not_found);
  CHECK(unknown.error().message.find("no-such-user-warm") != std::string::npos);

  tree t;
  const std::string secret = (t.root / "secret").string();
  const std::string group = (t.root / "group").string();
  const std::string open_file = (t.root / "open").string();
  write_file(secret, "s", 0600);
  write_file(group, "g", 0640);  // root's group: readable only with gid 0 among the groups
  write_file(open_file, "o", 0644);
  const sb::identity who = *nobody;

  int st = in_child([&] {
    // Root as a service manager may start it: with supplementary groups (root's, and shadow's
    // where it exists), which the drop must clear.
    const gid_t groups[] = {0, 42};
    if (::setgroups(2, groups) != 0) return 20;
    if (sb::become(who) != 0) return 1;
    if (::getuid() != who.uid || ::geteuid() != who.uid) return 2;
    if (::getgid() != who.gid || ::getegid() != who.gid) return 3;
    if (::getgroups(0, nullptr) != 0) return 4;
    if (::setuid(0) == 0 || ::seteuid(0) == 0 || ::setgid(0) == 0) return 5;
    if (!open_fails(secret, O_RDONLY, EACCES)) return 6;
    if (!open_fails(group, O_RDONLY, EACCES)) return 7;
    if (!open_fails("/etc/shadow", O_RDONLY, EACCES)) return 9;  // root:shadow 0640
    if (!can_read(open_file)) return 8;  // the refusals above are the modes, not the path
    return 0;
  });
  CHECK(describe(st) == "exit 0");

  // Becoming root is not a drop.
  st = in_child([] { return sb::become(sb::identity{0, 0, "root"}); });
  CHECK(describe(st) == "exit " + std::to_string(EINVAL));
}

TEST_CASE("become: keeping read-search reads what Landlock allows, whatever the modes",
          "[sandbox][user]") {
  if (::geteuid() != 0) {
    WARN("skipped: not running as root");
    return;
  }
  auto nobody = sb::find_user("nobody");
  REQUIRE(nobody);
  tree t;
  ::chmod(t.a().c_str(), 0700);  // a repository only root may enter
  write_file(t.a() / "secret", "s", 0600);
  write_file(t.b() / "secret", "s", 0600);
  sb::fs_rules rules;
  rules.read = {t.a().string()};
  rules.read_exec = sb::system_read_exec_paths();
  auto ruleset = build(rules);
  const sb::identity who = *nobody;
  int st = in_child([&] {
    if (sb::become(who, true) != 0) return 1;
    if (::setuid(0) == 0 || ::setgid(0) == 0) return 2;
    if (!can_read((t.a() / "secret").string())) return 3;  // the capability: modes do not stop it
    if (!open_fails((t.a() / "file").string(), O_WRONLY, EACCES)) return 4;  // nor does it write
    if (sb::restrict_self(ruleset) != 0) return 5;
    if (!can_read((t.a() / "secret").string())) return 6;
    if (!open_fails((t.b() / "secret").string(), O_RDONLY, EACCES))
      return 7;  // Landlock does stop it
    if (!open_fails("/etc/shadow", O_RDONLY, EACCES)) return 8;
    if (!sb::apply_seccomp({})) return 9;
    struct {
      file_handle h;
      unsigned char bytes[128];
    } handle{};
    handle.h.handle_bytes = sizeof handle.bytes;
    int mount_id = 0;
    errno = 0;
    if (::name_to_handle_at(AT_FDCWD, "/etc/shadow", &handle.h, &mount_id, 0) == 0 ||
        errno != EPERM)
      return 10;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
  // Without it, the same child cannot read the repository at all.
  st = in_child([&] {
    if (sb::become(who) != 0) return 1;
    return can_read((t.a() / "secret").string()) ? 2 : 0;
  });
  CHECK(describe(st) == "exit 0");
}

TEST_CASE("seccomp: exec, network, debugging and admin calls are refused", "[sandbox][seccomp]") {
  int st = in_child([] {
    if (!sb::apply_seccomp(sb::syscall_rules{})) return 1;
    char* const argv[] = {const_cast<char*>("false"), nullptr};
    char* const envp[] = {nullptr};
    if (::execve("/bin/false", argv, envp) == 0 || errno != EPERM) return 2;
    if (::syscall(SYS_execveat, AT_FDCWD, "/bin/false", argv, envp, 0) == 0 || errno != EPERM) {
      return 15;
    }
    if (::socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EPERM) return 3;
    if (::socket(AF_INET6, SOCK_DGRAM, 0) >= 0 || errno != EPERM) return 4;
    if (::socket(AF_NETLINK, SOCK_RAW, 0) >= 0 || errno != EPERM) return 5;
    int pair[2];
    if (::socketpair(AF_INET, SOCK_STREAM, 0, pair) == 0 || errno != EPERM) return 6;
    int u = ::socket(AF_UNIX, SOCK_STREAM, 0);  // local sockets still work
    if (u < 0) return 7;
    ::close(u);
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 8;
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0 || errno != EPERM) return 9;
    if (::unshare(CLONE_NEWUSER) == 0 || errno != EPERM) return 10;
    if (::mount("none", "/mnt", "tmpfs", 0, nullptr) == 0 || errno != EPERM) return 11;
    if (::syscall(SYS_io_uring_setup, 1, nullptr) >= 0 || errno != EPERM) return 12;
    if (::personality(0xffffffff) < 0) return 13;  // the query is allowed
    if (::personality(ADDR_NO_RANDOMIZE) >= 0 || errno != EPERM) return 14;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
  // The parent is unfiltered.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  CHECK(s >= 0);
  if (s >= 0) ::close(s);
}

TEST_CASE("seccomp: threads started before the filter get it too (TSYNC)", "[sandbox][seccomp]") {
  int st = in_child([] {
    std::atomic<int> stage{0};  // 1: filter applied; 2: thread done, result in `result`
    std::atomic<int> result{-1};
    std::thread worker([&] {
      while (stage.load() != 1)
        std::this_thread::yield();
      int s = ::socket(AF_INET, SOCK_STREAM, 0);
      result = s >= 0 ? 1 : (errno == EPERM ? 0 : 2);
      stage = 2;
    });
    bool ok = static_cast<bool>(sb::apply_seccomp(sb::syscall_rules{}));
    stage = 1;
    worker.join();
    if (!ok) return 1;
    return result == 0 ? 0 : 10 + result;
  });
  CHECK(describe(st) == "exit 0");
}

TEST_CASE("seccomp: other syscall ABIs cannot go around the filter", "[sandbox][seccomp]") {
  // x32 numbers (bit 30 set) hit libseccomp's bad-arch action: KILL, so SIGSYS.
  int st = in_child([] {
    if (!sb::apply_seccomp(sb::syscall_rules{})) return 1;
    long fd = ::syscall(0x40000000L | SYS_socket, AF_INET, SOCK_STREAM, 0);
    return fd >= 0 ? 2 : 3;
  });
  CHECK(describe(st) == "signal " + std::to_string(SIGSYS));
  // An i386 `int 0x80` socket(2) (number 359): killed by the filter (SIGSYS), or by the CPU
  // (SIGSEGV) where the kernel runs no 32-bit syscalls; it never returns a socket.
  st = in_child([] {
    if (!sb::apply_seccomp(sb::syscall_rules{})) return 1;
    long r = 359;
    asm volatile("int $0x80"
                 : "+a"(r)
                 : "b"(AF_INET), "c"(SOCK_STREAM), "d"(0)
                 : "memory", "r8", "r9", "r10", "r11");
    return r >= 0 ? 2 : 3;
  });
  CHECK((describe(st) == "signal " + std::to_string(SIGSYS) ||
         describe(st) == "signal " + std::to_string(SIGSEGV)));
}

TEST_CASE("sandbox_self: limits, user, Landlock and seccomp in one call", "[sandbox][self]") {
  tree t;
  const bool root = ::geteuid() == 0;
  uid_t nobody_uid = 0;
  if (root) {
    auto nobody = sb::find_user("nobody");
    REQUIRE(nobody);
    nobody_uid = nobody->uid;
    REQUIRE(::chown(t.a().c_str(), nobody->uid, nobody->gid) == 0);  // nobody writes there
  }
  const std::string a = t.a().string(), b = t.b().string();
  const std::string missing = (t.root / "missing").string();

  int st = in_child([&] {
    sb::self_policy p;
    p.files.read_exec = sb::system_read_exec_paths();
    p.files.write = {a, missing};
    p.rlimits.open_files = 64;
    p.user = "nobody";
    auto r = sb::sandbox_self(p);
    if (!r) return 1;
    if (!r->landlock || r->landlock_abi < 1 || !r->seccomp) return 2;
    if (r->user_changed != root) return 3;
    bool noted = false;
    for (const auto& n : r->notes)
      noted = noted || n.find(missing) != std::string::npos;
    if (!noted) return 4;
    if (root && (::getuid() != nobody_uid || ::setuid(0) == 0)) return 5;
    int fd = ::open((a + "/made").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return 6;
    ::close(fd);
    if (!open_fails(b + "/file", O_RDONLY, EACCES)) return 7;
    if (!open_fails("/etc/shadow", O_RDONLY, EACCES)) return 8;
    if (!can_read("/proc/cpuinfo") || !can_list("/sys/devices/system/cpu")) return 9;
    if (::socket(AF_INET, SOCK_STREAM, 0) >= 0 || errno != EPERM) return 10;
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    char* const envp[] = {nullptr};
    if (::execve("/bin/false", argv, envp) == 0 || errno != EPERM) return 11;
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_max != 64) return 12;
    return 0;
  });
  CHECK(describe(st) == "exit 0");
  CHECK(fs::exists(t.a() / "made"));
}

TEST_CASE("sandbox_self refuses a process that already runs threads", "[sandbox][self]") {
  int st = in_child([] {
    std::atomic<bool> stop{false};
    std::thread worker([&] {
      while (!stop.load())
        std::this_thread::yield();
    });
    auto r = sb::sandbox_self(sb::self_policy{});
    stop = true;
    worker.join();
    if (r) return 1;
    if (r.error().code != warm::errc::invalid_argument) return 2;
    // Nothing was applied: the network is still there.
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 3;
    ::close(s);
    return 0;
  });
  CHECK(describe(st) == "exit 0");
}
