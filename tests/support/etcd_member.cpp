#include "support/etcd_member.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace warm::test {
namespace {

namespace fs = std::filesystem;
using steady = std::chrono::steady_clock;

// Waits up to `limit` for `pid` to exit; whether it did (then reaped).
bool reap_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = steady::now() + limit;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    if (steady::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// An executable named by the environment variable `variable`, else `fallback`.
std::string program(const char* variable, const char* fallback) {
  const char* named = std::getenv(variable);
  return named && *named ? named : fallback;
}

}  // namespace

etcd_member::etcd_member() : etcd_member(etcd_member_options{}) {}

etcd_member::etcd_member(etcd_member_options options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/warm-etcd-XXXXXX";
  if (::mkdtemp(tmpl)) dir_ = tmpl;
  client_port_ = free_port();
  peer_port_ = free_port();
  if (options_.tls) health_port_ = free_port();
}

etcd_member::~etcd_member() {
  kill();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::string etcd_member::executable() {
  const char* named = std::getenv("ETCD");
  std::string path = named && *named ? named : "/usr/bin/etcd";
  return ::access(path.c_str(), X_OK) == 0 ? path : std::string();
}

std::uint16_t etcd_member::free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  std::uint16_t port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

std::string etcd_member::endpoint() const {
  return (secured() ? "https://" : "http://") + host_port();
}
std::string etcd_member::host_port() const {
  return "127.0.0.1:" + std::to_string(client_port_);
}

std::string etcd_member::log() const {
  std::ifstream in(dir_ / "etcd.log");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

expected<void> etcd_member::start() {
  if (running()) return {};
  for (int attempt = 0;; ++attempt) {
    auto r = start_once();
    if (r || started_before_ || attempt == 4) {
      if (r) started_before_ = true;
      return r;
    }
    // Perhaps a port was taken: a fresh member on other ports (the data directory is new).
    std::error_code ec;
    fs::remove_all(dir_ / "data", ec);
    client_port_ = free_port();
    peer_port_ = free_port();
    if (secured()) health_port_ = free_port();
  }
}

expected<void> etcd_member::start_once() {
  const std::string exe = executable();
  if (exe.empty()) return make_error(errc::unavailable, "no etcd executable (set ETCD)");
  if (dir_.empty()) return make_error(errc::unavailable, "no temporary directory");
  if (secured())
    if (auto made = make_certificates(); !made) return made;
  const std::string client = endpoint();
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  // clang-format off
  std::vector<std::string> args{exe,
                                "--name", "warm-test",
                                "--data-dir", (dir_ / "data").string(),
                                "--listen-client-urls", client,
                                "--advertise-client-urls", client,
                                "--listen-peer-urls", peer,
                                "--initial-advertise-peer-urls", peer,
                                "--initial-cluster", "warm-test=" + peer};
  if (secured())
    args.insert(args.end(), {"--cert-file", (dir_ / "server.pem").string(),
                             "--key-file", (dir_ / "server.key").string(),
                             "--trusted-ca-file", ca_file(),
                             "--client-cert-auth",
                             "--listen-metrics-urls",
                             "http://127.0.0.1:" + std::to_string(health_port_)});
  // clang-format on
  args.insert(args.end(), options_.flags.begin(), options_.flags.end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = (dir_ / "etcd.log").string();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return make_error(errc::unavailable, "fork failed");
  if (pid == 0) {
    // Only async-signal-safe calls here: the parent may have other threads (gRPC's).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    if (::getppid() != parent) ::_exit(127);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  const auto deadline = steady::now() + std::chrono::seconds(20);
  while (!healthy()) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      auto text = log();
      if (text.size() > 2000) text = text.substr(text.size() - 2000);
      return make_error(errc::unavailable, "etcd exited during startup: " + text);
    }
    if (steady::now() > deadline) {
      kill();
      return make_error(errc::unavailable, "etcd not healthy within 20 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

void etcd_member::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);  // in case it is paused
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void etcd_member::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  if (!reap_within(pid_, std::chrono::seconds(10))) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

namespace {

// Whether every thread of `pid` is stopped (state T or t in /proc/PID/task/*/stat).
bool all_stopped(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) return false;
    const char state = stat[close + 2];
    if (state != 'T' && state != 't') return false;
  }
  return !ec;
}

}  // namespace

void etcd_member::pause() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGSTOP);
  // A signal stops a thread when it is next scheduled: wait until every thread has stopped, so
  // that nothing sent after pause() returns is answered (at most 2 s).
  for (int i = 0; i < 2000 && !all_stopped(pid_); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void etcd_member::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

// GET /health on the client port (secured: the metrics port, plain HTTP), answered
// {"health":"true"} once the member serves requests.
bool etcd_member::healthy() const {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(secured() ? health_port_ : client_port_);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[512];
      ssize_t got = 0;
      while ((got = ::recv(fd, buf, sizeof(buf), 0)) > 0)
        reply.append(buf, static_cast<std::size_t>(got));
    }
  }
  ::close(fd);
  return reply.find("\"health\":\"true\"") != std::string::npos;
}

// ---- secured members and authentication ---------------------------------------------------------

std::string etcd_member::ca_file() const {
  return (dir_ / "ca.pem").string();
}
std::string etcd_member::other_ca_file() const {
  return (dir_ / "other-ca.pem").string();
}
std::string etcd_member::cert_file(const std::string& user) const {
  return (dir_ / ("client-" + user + ".pem")).string();
}
std::string etcd_member::key_file(const std::string& user) const {
  return (dir_ / ("client-" + user + ".key")).string();
}

int etcd_member::run(const std::vector<std::string>& command, std::string* output) const {
  output->clear();
  std::vector<std::string> args = command;
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_path = (dir_ / "command.out").string(), dir = dir_.string();
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || null < 0) {
    if (out >= 0) ::close(out);
    if (null >= 0) ::close(null);
    *output = "cannot open " + out_path;
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls here, as in start_once.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(null, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out);
  ::close(null);
  if (pid < 0) {
    *output = "fork failed";
    return -1;
  }
  int status = -1;
  const auto deadline = steady::now() + std::chrono::seconds(20);
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (steady::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      status = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream in(out_path);
  *output = std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

expected<void> etcd_member::make_certificates() {
  if (fs::exists(dir_ / "ca.pem")) return {};
  const std::string openssl = program("OPENSSL", "/usr/bin/openssl");
  auto call = [&](std::vector<std::string> args) -> expected<void> {
    args.insert(args.begin(), openssl);
    std::string output;
    if (run(args, &output) != 0)
      return make_error(errc::unavailable, "openssl " + args[1] + " failed: " + output);
    return {};
  };
  // Small, quick keys: EC P-256.
  auto key_args = [](std::vector<std::string> args) {
    args.insert(args.end(),
                {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"});
    return args;
  };
  for (const char* ca : {"ca", "other-ca"})
    if (auto r = call(
            key_args({"req", "-x509", "-days", "2", "-subj", std::string("/CN=warm-test-") + ca,
                      "-keyout", std::string(ca) + ".key", "-out", std::string(ca) + ".pem"}));
        !r)
      return r;
  // A certificate signed by ca.pem: NAME.pem and NAME.key, common name `cn`, extensions `ext`.
  auto issue = [&](const std::string& name, const std::string& cn,
                   const std::string& ext) -> expected<void> {
    std::ofstream(dir_ / (name + ".ext")) << ext;
    if (auto r = call(key_args({"req", "-new", "-subj", "/CN=" + cn, "-keyout", name + ".key",
                                "-out", name + ".csr"}));
        !r)
      return r;
    return call({"x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out",
                 name + ".pem"});
  };
  // etcd's grpc-gateway presents the server's certificate as a client: both uses.
  if (auto r = issue("server", "warm-test-etcd",
                     "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
      !r)
    return r;
  std::vector<std::string> users{"root"};
  users.insert(users.end(), options_.users.begin(), options_.users.end());
  for (const auto& user : users)
    if (auto r = issue("client-" + user, user, "extendedKeyUsage=clientAuth\n"); !r) return r;
  return {};
}

expected<std::string> etcd_member::etcdctl(const std::vector<std::string>& args) {
  std::vector<std::string> command{program("ETCDCTL", "/usr/bin/etcdctl"),
                                   "--endpoints=" + (secured() ? endpoint() : host_port()),
                                   "--dial-timeout=5s", "--command-timeout=15s"};
  if (secured())
    command.insert(command.end(), {"--cacert=" + ca_file(), "--cert=" + cert_file("root"),
                                   "--key=" + key_file("root")});
  if (!root_password_.empty()) command.push_back("--user=root:" + root_password_);
  command.insert(command.end(), args.begin(), args.end());
  std::string output;
  if (run(command, &output) != 0) {
    std::string what;
    for (const auto& a : args)
      what += " " + a;
    return make_error(errc::unavailable, "etcdctl" + what + " failed: " + output);
  }
  return output;
}

expected<void> etcd_member::enable_auth(const std::string& root_password) {
  if (auto r = etcdctl({"user", "add", "root:" + root_password}); !r) return std::move(r).error();
  if (auto r = etcdctl({"auth", "enable"}); !r) return std::move(r).error();
  root_password_ = root_password;
  return {};
}

expected<void> etcd_member::add_user(const std::string& user, const std::string& password,
                                     const std::string& prefix) {
  const std::string role = user + "-role";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"role", "add", role},
           {"role", "grant-permission", "--prefix=true", role, "readwrite", prefix},
           {"user", "add", user + ":" + password},
           {"user", "grant-role", user, role}})
    if (auto r = etcdctl(args); !r) return std::move(r).error();
  return {};
}

}  // namespace warm::test
