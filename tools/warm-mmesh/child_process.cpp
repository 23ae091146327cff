#include "child_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

extern char** environ;

namespace warm::mmesh {

expected<std::unique_ptr<runtime_child>> runtime_child::start(const std::string& command,
                                                              const confinement_options& confine) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/warm-mmesh.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!::mkdtemp(buffer.data()))  // mode 0700
    return make_error(errc::unavailable,
                      "cannot make a directory in " + pattern + ": " + std::strerror(errno));
  std::unique_ptr<runtime_child> child(new runtime_child);
  child->dir_ = buffer.data();
  const std::string socket = child->dir_ + "/runtime.sock";
  if (socket.size() >= 108)  // sockaddr_un.sun_path
    return make_error(errc::invalid_argument,
                      socket + " is too long for a Unix socket: set TMPDIR to a shorter path");
  child->address_ = "unix:" + socket;

  std::optional<confinement_plan> plan;
  if (confine.enabled) {
    const char* repos = std::getenv("WARM_RUNTIME_REPOS");
    auto planned = plan_confinement(confine, command, split_paths(repos ? repos : ""), child->dir_);
    if (!planned)
      return make_error(planned.error().code,
                        "cannot confine the runtime: " + planned.error().message +
                            " (WARM_MMESH_CONFINE=0 or --no-confine runs it unconfined)");
    plan = std::move(*planned);
  }

  // Everything the child needs, made before fork. The bridge is single-threaded here, so the
  // child may allocate (confine_child does) before it execs.
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "WARM_RUNTIME_FD=", 16) != 0 &&
        std::strncmp(*e, "WARM_GRPC_ADDRESS=", 18) != 0 &&
        !(plan && std::strncmp(*e, "TMPDIR=", 7) == 0))
      env_text.emplace_back(*e);
  env_text.push_back("WARM_GRPC_ADDRESS=" + child->address_);
  // Confined, the private directory is the one place it may write: its temporary files go there.
  if (plan) env_text.push_back("TMPDIR=" + child->dir_);
  std::vector<char*> envp;
  for (auto& e : env_text)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string script = "exec " + command;
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0)
    return make_error(errc::unavailable, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the bridge died before the line above
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // kj blocks the signals it captures
    if (plan) {
      std::string warning;
      const std::string failed = confine_child(*plan, warning);
      if (!failed.empty()) {
        const std::string message = "warm-mmesh: cannot confine the runtime: " + failed +
                                    " (WARM_MMESH_CONFINE=0 or --no-confine runs it unconfined)\n";
        (void)!::write(2, message.data(), message.size());
        ::_exit(126);
      }
      if (!warning.empty()) {
        const std::string message = "warm-mmesh: WARNING: " + warning + "\n";
        (void)!::write(2, message.data(), message.size());
      }
      if (::getppid() != parent) ::_exit(127);  // died while the death signal was re-armed
    }
    ::execve("/bin/sh", const_cast<char**>(argv), envp.data());
    static const char message[] = "warm-mmesh: cannot run /bin/sh\n";
    (void)!::write(2, message, sizeof message - 1);
    ::_exit(127);
  }
  child->pid_ = pid;
  return child;
}

runtime_child::~runtime_child() {
  // The directory first: warmd allows 200 ms after closing the socket before it kills the bridge,
  // and a runtime slow to stop must not leave the directory behind. Removing it disturbs no
  // connection already made.
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  stop();
}

std::uint64_t runtime_child::rss_bytes() const {
  pid_t pid = 0;
  KJ_IF_MAYBE (p, pid_) {
    pid = *p;
  } else {
    return 0;
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  const auto n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &size, &resident) != 2) return 0;
  return static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void runtime_child::stop(int grace_ms) {
  pid_t pid = 0;
  KJ_IF_MAYBE (p, pid_) {
    pid = *p;
  } else {
    return;
  }
  ::kill(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = nullptr;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
  }
  return "ended with wait status " + std::to_string(status);
}

void end_like(int wait_status) {
  std::fflush(nullptr);
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    struct rlimit none {};
    ::setrlimit(RLIMIT_CORE, &none);
    std::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    ::_exit(128 + sig);  // a signal whose default action is to go on
  }
  ::_exit(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1);
}

}  // namespace warm::mmesh
