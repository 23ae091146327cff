// A real warmd for black-box tests: started on a temporary directory, waited for until its socket
// accepts, stopped with SIGTERM or SIGINT (its exit status checked) or crashed with SIGKILL.
// Header-only; used by warmd_test, warmd_security_test and http_test.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "warm/model_writer.hpp"

namespace warm::test {

namespace fs = std::filesystem;

// warmd processes, one at a time, on one temporary directory: repo/, state/ and w.sock inside it.
// The daemon is build/warmd, named by the WARMD environment variable (meson sets it).
class warmd_process {
 public:
  warmd_process() {
    char tmpl[] = "/tmp/warmd-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "repo");
  }
  ~warmd_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir() const { return dir_; }
  pid_t pid() const { return pid_; }  // the running warmd's, -1 when none
  fs::path repo() const { return dir_ / "repo"; }
  std::string socket() const { return (dir_ / "w.sock").string(); }
  std::string address() const { return "unix:" + socket(); }
  std::string device = "host:4MiB";
  std::string log_level = "warn";
  mode_t child_umask = 022;  // the umask warmd starts with
  rlim_t open_file_limit =
      0;  // when set, warmd's soft and hard RLIMIT_NOFILE (as `prlimit --nofile`)

  // Writes repo/<name>/1/model.safetensors with these widths.
  void write_model(const std::string& name, std::vector<std::uint64_t> widths) {
    warm::dense_model_options o;
    o.widths = std::move(widths);
    REQUIRE(warm::write_dense_model((repo() / name / "1" / "model.safetensors").string(), o));
  }

  // Starts warmd (the unix listener plus `extra`) and waits (bounded) until the unix socket
  // accepts connections; every listener is bound by then.
  void start(const std::vector<std::string>& extra = {}) {
    spawn(base_args(true, extra));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!accepting()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("warmd exited during startup (status " << status << "): " << log());
      }
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Runs warmd with `args` after the repo/state/device flags (no listen address unless given)
  // and returns its exit status; -1 when it did not exit on its own within 10 s.
  int run_to_exit(const std::vector<std::string>& args) {
    spawn(base_args(false, args));
    return reap_within(std::chrono::seconds(10));
  }

  // SIGTERM; the exit status (-1 if it did not exit normally within 20 s).
  int stop() { return end(SIGTERM); }
  // SIGINT (Ctrl-C), which warmd handles like SIGTERM; the exit status, as stop().
  int interrupt() { return end(SIGINT); }
  // SIGKILL, reaped.
  void crash() { end(SIGKILL); }

  // The port warmd announced in its log for the TCP listener it was given as HOST:0: the number
  // after the last `announcement` ("listening on 127.0.0.1:" for RPC, "serving HTTP on
  // 127.0.0.1:" for HTTP). A port probed free before warmd starts can be taken by a test running
  // beside this one first; port 0 cannot. Needs log_level "info"; waits (bounded) for the line,
  // since the RPC listeners are announced just after they begin accepting.
  std::uint16_t announced_port(const std::string& announcement) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto text = log();
      auto at = text.rfind(announcement);
      if (at != std::string::npos) {
        auto digits = at + announcement.size();
        auto end = text.find_first_not_of("0123456789", digits);
        if (end != std::string::npos && end > digits)
          return static_cast<std::uint16_t>(std::stoul(text.substr(digits, end - digits)));
      }
      if (std::chrono::steady_clock::now() > deadline)
        FAIL("no \"" << announcement << "\" in the log: " << text);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string log() const {
    std::ifstream in(dir_ / "warmd.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  std::vector<std::string> base_args(bool with_unix, const std::vector<std::string>& extra) const {
    const char* exe = std::getenv("WARMD");
    REQUIRE(exe != nullptr);
    std::vector<std::string> args{
        exe,        "--repo", repo().string(), "--state", (dir_ / "state").string(),
        "--device", device,   "--log-level",   log_level};
    if (with_unix) {
      args.push_back("--listen");
      args.push_back(address());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  void spawn(std::vector<std::string> args) {
    REQUIRE(pid_ < 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      ::umask(child_umask);
      if (open_file_limit) {
        rlimit limit{open_file_limit, open_file_limit};
        ::setrlimit(RLIMIT_NOFILE, &limit);
      }
      int log = ::open((dir_ / "warmd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }

  int end(int signal) {
    REQUIRE(pid_ > 0);
    ::kill(pid_, signal);
    return reap_within(std::chrono::seconds(20));
  }

  // Waits for the process to exit: its exit status, or -1 when it was killed by a signal or did
  // not exit within `limit` (then it is killed).
  int reap_within(std::chrono::seconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  bool accepting() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket().c_str(), sizeof(addr.sun_path) - 1);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  fs::path dir_;
  pid_t pid_ = -1;
};

}  // namespace warm::test
