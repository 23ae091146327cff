#include "confinement.hpp"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace warm::mmesh {

namespace fs = std::filesystem;

sandbox::fs_rules runtime_rules(const runtime_paths& p) {
  sandbox::fs_rules r;
  // Programs and libraries: /usr (the interpreter, its standard library and Debian's
  // dist-packages: numpy, scipy, sklearn, xgboost, grpcio), the loader's files, /dev/null,
  // /dev/urandom, CPU topology for OpenBLAS and OpenMP, /etc/localtime (sandbox.cpp says why).
  r.read_exec = sandbox::system_read_exec_paths();
  // The runtime's own program: /bin/sh execs it (EXECUTE on the file), and, a script, its
  // interpreter reads it. Its directory, read-only: a script's interpreter looks for modules
  // beside it (Python's sys.path[0]; build/ also holds build/schemas). Not executable: the
  // other programs there (warmd, warmctl) are not the runtime's to run. A binary that maps
  // libraries from beside it (not under /usr) needs them executable: that is not provided.
  if (!p.program.empty()) {
    r.read_exec.push_back(p.program);
    r.read.push_back(fs::path(p.program).parent_path().string());
  }
  // The models: read-only, never written.
  r.read.insert(r.read.end(), p.repositories.begin(), p.repositories.end());
  // What the command line names, the operator adds (--read, WARM_MMESH_READ) or the program
  // declares (a launcher's package directory).
  r.read.insert(r.read.end(), p.extra_read.begin(), p.extra_read.end());
  // The listen backlog: gRPC sizes its listening socket's queue from it.
  r.read.push_back("/proc/sys/net/core/somaxconn");
  // Its own memory, for the sizes a runtime reports (resident bytes after a load): statm only,
  // not /proc/self as a whole. Resolved in the child, so it is the runtime's own.
  r.read.push_back("/proc/self/statm");
  // The memory it may use: a runtime sizes its default capacity from the cgroup's limit. The
  // one file, not the hierarchy (other cgroups' stats are none of its business).
  r.read.push_back("/sys/fs/cgroup/memory.max");
  // Its socket, and its temporary files (TMPDIR points here): the only place it may write.
  if (!p.private_dir.empty()) r.write.push_back(p.private_dir);
  return r;
}

std::vector<std::string> split_paths(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ':');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string command_program(const std::string& command, const std::string& path_env) {
  std::size_t i = command.find_first_not_of(" \t\n");
  if (i == std::string::npos) return {};
  std::string word;
  if (command[i] == '\'' || command[i] == '"') {
    const std::size_t end = command.find(command[i], i + 1);
    if (end == std::string::npos) return {};
    word = command.substr(i + 1, end - i - 1);
  } else {
    const std::size_t end = command.find_first_of(" \t\n;|&<>()$`\\\"'", i);
    word = command.substr(i, end == std::string::npos ? std::string::npos : end - i);
  }
  if (word.empty() || word.find('=') != std::string::npos) return {};  // VAR=value prog
  std::error_code ec;
  auto usable = [&ec](const fs::path& p) {
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  fs::path found;
  if (word.find('/') != std::string::npos) {
    found = word;
  } else {
    for (const std::string& dir : split_paths(path_env)) {
      if (usable(fs::path(dir) / word)) {
        found = fs::path(dir) / word;
        break;
      }
    }
  }
  if (found.empty() || !usable(found)) return {};
  fs::path canonical = fs::canonical(found, ec);
  return ec ? std::string() : canonical.string();
}

std::vector<std::string> command_paths(const std::string& command) {
  std::vector<std::string> out;
  std::stringstream words(command);
  std::string word;
  words >> word;  // the program: command_program's
  while (words >> word) {
    if (word.size() >= 2 && (word[0] == '\'' || word[0] == '"') && word.back() == word[0])
      word = word.substr(1, word.size() - 2);
    if (word.rfind("--", 0) == 0 && word.find('=') != std::string::npos)
      word = word.substr(word.find('=') + 1);
    if (word.find('/') == std::string::npos) continue;
    std::error_code ec;
    const auto status = fs::status(word, ec);
    if (ec || !(fs::is_directory(status) || fs::is_regular_file(status))) continue;
    out.push_back(fs::absolute(word, ec).lexically_normal().string());
  }
  return out;
}

std::vector<std::string> declared_read_paths(const std::string& program) {
  std::vector<std::string> out;
  if (program.empty()) return out;
  std::ifstream in(program, std::ios::binary);
  char head[4096];
  in.read(head, sizeof head);
  const std::string text(head, static_cast<std::size_t>(in.gcount()));
  if (text.rfind("#!", 0) != 0) return out;
  static const std::string key = "# warm-mmesh-read:";
  const fs::path base = fs::path(program).parent_path();
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::string list = line.substr(key.size());
    list.erase(0, list.find_first_not_of(" \t"));
    list.erase(list.find_last_not_of(" \t\r") + 1);
    for (const std::string& p : split_paths(list))
      out.push_back(p[0] == '/' ? p : (base / p).lexically_normal().string());
  }
  return out;
}

expected<bool> parse_confine_env(const std::string& value) {
  for (const char* off : {"0", "false", "no", "off"})
    if (value == off) return false;
  for (const char* on : {"", "1", "true", "yes", "on"})
    if (value == on) return true;
  return make_error(errc::invalid_argument,
                    "WARM_MMESH_CONFINE='" + value + "': give 0 (off) or 1 (on)");
}

expected<confinement_plan> plan_confinement(const confinement_options& options,
                                            const std::string& command,
                                            const std::vector<std::string>& repositories,
                                            const std::string& private_dir) {
  confinement_plan plan;
  runtime_paths paths;
  paths.repositories = repositories;
  paths.extra_read = options.read;
  const char* path_env = std::getenv("PATH");
  paths.program = command_program(command, path_env ? path_env : "/usr/bin:/bin");
  for (std::string& p : command_paths(command))
    paths.extra_read.push_back(std::move(p));
  for (std::string& p : declared_read_paths(paths.program))
    paths.extra_read.push_back(std::move(p));
  paths.private_dir = private_dir;
  plan.files = runtime_rules(paths);
  plan.syscalls.deny_exec = false;  // /bin/sh execs the command, a launcher its interpreter
  if (::geteuid() == 0 && !options.user.empty()) {
    auto who = sandbox::find_user(options.user);
    if (!who) return std::move(who).error();
    if (who->uid == 0)
      return make_error(errc::invalid_argument, "user '" + options.user + "' is root");
    if (::chown(private_dir.c_str(), who->uid, who->gid) != 0)
      return make_error(errc::unavailable, "cannot give " + private_dir + " to user '" +
                                               options.user + "': " + std::strerror(errno));
    plan.as = std::move(*who);
  }
  return plan;
}

namespace {

// Makes CAP_DAC_READ_SEARCH, which become() kept, survive execve: inheritable, then ambient
// (a capability the process holds only as permitted and effective is lost at execve).
int keep_read_search_across_exec() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  data[0].effective = data[0].permitted = data[0].inheritable = 1u << CAP_DAC_READ_SEARCH;
  if (::syscall(SYS_capset, &header, data) != 0) return errno;
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0) != 0) return errno;
  return 0;
}

}  // namespace

std::string confine_child(const confinement_plan& plan, std::string& warning) {
  auto ruleset = sandbox::landlock_ruleset::build(plan.files);
  if (!ruleset) return ruleset.error().message;
  sandbox::limits limits;  // no core dumps: a crash writes no model memory to disk
  if (int e = sandbox::apply_limits(limits))
    return std::string("setting resource limits: ") + std::strerror(e);
  if (plan.as) {
    // The capability only goes with a Landlock ruleset that bounds it: without Landlock the user
    // reads what its permission bits allow, no more.
    const bool keep = ruleset->available();
    if (int e = sandbox::become(*plan.as, keep))
      return "becoming user '" + plan.as->name + "': " + std::strerror(e);
    if (keep) {
      if (int e = keep_read_search_across_exec())
        return std::string("keeping CAP_DAC_READ_SEARCH: ") + std::strerror(e);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a change of user cleared it
  }
  if (ruleset->available()) {
    if (int e = sandbox::restrict_self(*ruleset))
      return std::string("Landlock: restricting: ") + std::strerror(e);
  } else {
    warning = "the kernel has no Landlock: the runtime's files are not confined";
  }
  if (auto r = sandbox::apply_seccomp(plan.syscalls); !r) return r.error().message;
  return {};
}

}  // namespace warm::mmesh
