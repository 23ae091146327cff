// warm-runtime: the reference model runtime (docs/runtimes.md). Serves schemas/runtime.capnp with
// warm's own backends, so that models (TorchScript ones above all) can run isolated from warmd:
//
//   warmd --runtime torch='build/warm-runtime --capacity 4GiB' ...   (warmd starts and supervises
//   it) build/warm-runtime --listen unix:/run/warm/torch.sock &           (started by someone else)
//   warmd --runtime torch=unix:/run/warm/torch.sock ...
//
// Started by warmd, it serves the connected socket in WARM_RUNTIME_FD and exits when warmd closes
// it. With --listen it serves every connection to the socket until SIGTERM or SIGINT.
//
// Models are code, so it sandboxes itself before it serves (docs/runtimes.md, "Trust"): it may
// read only its repositories (--repo, and WARM_RUNTIME_REPOS from warmd) and the system's
// libraries, write nothing, start no program, open no network socket; its address space is
// limited (--memory-limit), and when started as root it runs as --user (default nobody). Loads
// from anywhere else are refused. A load or inference past --call-cpu-seconds of CPU or
// --call-seconds of running time ends the process with status 3 (call_watch.hpp). `--describe` is
// the short-lived helper warmd runs to describe a TorchScript file (handed over as descriptor 3) in
// a sandbox of its own.
#include <capnp/rpc-twoparty.h>
#include <fcntl.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "backends/code_helper.hpp"
#include "sandbox/sandbox.hpp"
#include "server.hpp"
#include "warm/backend.hpp"
#include "warm/units.hpp"

namespace {

constexpr int exit_runaway = 3;  // a call into model code went past its limits

// Closes every descriptor from `first` up: nothing warmd (or whoever started it) held open
// reaches the sandbox by accident.
void close_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, ~0u, 0) == 0) return;
#endif
  for (int fd = first; fd < 65536; ++fd)
    ::close(fd);
}

// Threads of this process now.
std::size_t thread_count() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != decltype(it){}; it.increment(ec))
    ++n;
  return n;
}

// OpenBLAS starts its worker threads when it is loaded, before main, and Landlock confines only
// the thread that asks (and the threads it starts later): the sandbox needs a process of one
// thread. Runs this program again, once, with OpenBLAS's pool not started at load (the threads
// --backend-threads asks for are started later, confined). Returns only when no run is needed
// or it failed.
void run_single_threaded(char** argv) {
  if (thread_count() <= 1 || std::getenv("WARM_RUNTIME_SINGLE")) return;
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("WARM_RUNTIME_SINGLE", "1", 1);
  ::execv("/proc/self/exe", argv);
}

// The sandbox of a runtime serving `repositories`: read them and the system's libraries (and the
// capacity file), write nothing, no programs, no network, `memory` bytes of address space.
warm::sandbox::self_policy runtime_sandbox(const std::vector<std::string>& repositories,
                                           const std::string& capacity_file, std::uint64_t memory,
                                           const std::string& user) {
  warm::sandbox::self_policy p;
  p.files.read = repositories;
  if (!capacity_file.empty()) p.files.read.push_back(capacity_file);
  p.files.read_exec = warm::sandbox::system_read_exec_paths();
  p.rlimits.address_space = memory;
  p.user = user;
  p.keep_read_search = true;  // repositories only root may read stay readable; Landlock confines
  return p;
}

// warm-runtime --describe: describes the file on descriptor 3 and prints the answer (a
// description or an error, as JSON) on standard output; exit status 0 either way.
int describe(const std::string& kind, const std::string& path, std::uint64_t memory,
             std::uint64_t cpu_seconds, const std::string& user) {
  close_from(4);
  warm::sandbox::self_policy p;
  p.files.read_exec = warm::sandbox::system_read_exec_paths();
  p.rlimits.address_space = memory;
  p.rlimits.cpu_seconds = cpu_seconds;
  p.rlimits.open_files = 64;
  p.user = user;
  auto sandboxed = warm::sandbox::sandbox_self(p);
  if (!sandboxed) {
    std::cout << warm::error_to_json(sandboxed.error()) << std::endl;
    return 0;
  }
  warm::code_policy code;
  code.in_process = true;  // this process is the sandbox
  warm::set_code_policy(code);
  std::string answer;
  try {
    auto d = warm::describe_open_file(kind, 3, path);
    answer = d ? warm::description_to_json(*d) : warm::error_to_json(d.error());
  } catch (const std::bad_alloc&) {
    answer = warm::error_to_json(
        warm::make_error(warm::errc::invalid_argument,
                         path + ": describing the model took more than its memory limit"));
  } catch (const std::exception& e) {
    answer =
        warm::error_to_json(warm::make_error(warm::errc::invalid_argument, path + ": " + e.what()));
  }
  std::cout << answer << std::endl;
  return 0;
}

int serve_fd(warm::runtime_server_options options, int fd) {
  auto io = kj::setupAsyncIo();
  auto stream = io.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::SERVER);
  auto rpc =
      capnp::makeRpcServer(network, capnp::Capability::Client(warm::make_runtime_server(options)));
  network.onDisconnect().wait(io.waitScope);
  return 0;
}

// Binds the unix socket at `path` (mode 0600) and listens on it; replaces a socket an earlier run
// left there, never any other kind of file. The descriptor, or -1 after saying why.
int bind_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      std::cerr << "warm-runtime: --listen " << path
                << ": a file that is not a socket is there; not replacing it\n";
      return -1;
    }
    ::unlink(path.c_str());
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    std::cerr << "warm-runtime: --listen " << path << ": the path is too long for a socket\n";
    return -1;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const mode_t old = ::umask(0177);  // born 0600: only this user may connect
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  ::umask(old);
  if (bound != 0 || ::listen(fd, 128) != 0) {
    std::cerr << "warm-runtime: --listen " << path << ": " << std::strerror(errno) << "\n";
    ::close(fd);
    return -1;
  }
  return fd;
}

int serve_socket(warm::runtime_server_options options, int listen_fd, const std::string& path) {
  // Before any thread starts (the server's workers), so that SIGTERM and SIGINT reach the loop.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  auto io = kj::setupAsyncIo();
  auto listener = io.lowLevelProvider->wrapListenSocketFd(
      listen_fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  capnp::TwoPartyServer server(capnp::Capability::Client(warm::make_runtime_server(options)));
  auto serving = server.listen(*listener);
  // SIGTERM and SIGINT end it cleanly (the socket file is removed when the sandbox allows it).
  auto stop = io.unixEventPort.onSignal(SIGTERM).exclusiveJoin(io.unixEventPort.onSignal(SIGINT));
  std::cerr << "warm-runtime: serving " << path << "\n";
  serving.exclusiveJoin(stop.ignoreResult()).wait(io.waitScope);
  ::unlink(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"warm-runtime: a model runtime serving warm's backends over schemas/runtime.capnp"};
  std::string capacity = "1GiB", listen, capacity_file, memory_limit = "0", user = "nobody",
              kind = "torchscript", path;
  std::vector<std::string> repositories;
  unsigned threads = 0, loading_threads = 1, backend_threads = 1;
  bool no_sandbox = false, describe_mode = false;
  std::uint64_t describe_memory = std::uint64_t{8} << 30, cpu_seconds = 20;
  double call_cpu_seconds = 60, call_seconds = 300;
  app.add_option("--capacity", capacity, "memory models may take (e.g. 4GiB)")
      ->capture_default_str();
  app.add_option(
      "--capacity-file", capacity_file,
      "a file holding the capacity to report, read at every status (resizable while running)");
  app.add_option("--listen", listen,
                 "serve unix:PATH instead of the socket warmd passes (WARM_RUNTIME_FD)");
  app.add_option("--repo", repositories,
                 "a repository whose models it may load (repeatable; warmd passes its own in "
                 "WARM_RUNTIME_REPOS)");
  app.add_option("--threads", threads, "inference threads (0: one per core)")
      ->capture_default_str();
  app.add_option("--loading-threads", loading_threads, "loads at once, 1..64")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--backend-threads", backend_threads,
                 "threads one inference may use (BLAS, libtorch)")
      ->capture_default_str();
  app.add_option("--memory-limit", memory_limit,
                 "address space the process may take (e.g. 16GiB; 0: 4 x capacity + 8 GiB: "
                 "libraries map much)")
      ->capture_default_str();
  app.add_option("--call-cpu-seconds", call_cpu_seconds,
                 "CPU time one load or inference may use on its thread; past it the runtime exits "
                 "(0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
         "--call-seconds", call_seconds,
         "time one load or inference may run, waits included; past it the runtime exits (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--user", user, "the user to run as when started as root")->capture_default_str();
  app.add_flag(
      "--no-sandbox", no_sandbox,
      "serve without confining itself (models' code then runs with all of this process's rights)");
  app.add_flag("--describe", describe_mode,
               "describe the model file on descriptor 3 as JSON, sandboxed, and exit");
  app.add_option("--kind", kind, "with --describe: the model's kind");
  app.add_option("--path", path, "with --describe: the model's path, for messages");
  app.add_option("--memory", describe_memory, "with --describe: address space in bytes");
  app.add_option("--cpu-seconds", cpu_seconds, "with --describe: CPU time in seconds");
  CLI11_PARSE(app, argc, argv);
  if (!no_sandbox) run_single_threaded(argv);

  if (describe_mode)
    return describe(kind, path, describe_memory, cpu_seconds, ::geteuid() == 0 ? user : "");

  warm::runtime_server_options options;
  auto bytes = warm::parse_bytes(capacity);
  if (!bytes || *bytes == 0) {
    std::cerr << "warm-runtime: --capacity: "
              << (bytes ? "must be positive" : bytes.error().message) << "\n";
    return 2;
  }
  auto memory = warm::parse_bytes(memory_limit);
  if (!memory) {
    std::cerr << "warm-runtime: --memory-limit: " << memory.error().message << "\n";
    return 2;
  }
  if (const char* from_warmd = std::getenv("WARM_RUNTIME_REPOS")) {
    std::stringstream list(from_warmd);
    for (std::string root; std::getline(list, root, ':');)
      if (!root.empty()) repositories.push_back(root);
  }
  for (auto& root : repositories) {  // compared with the canonical roots warmd sends
    std::error_code ec;
    auto canonical = std::filesystem::canonical(root, ec);
    if (ec) {
      std::cerr << "warm-runtime: --repo " << root << ": " << ec.message() << "\n";
      return 2;
    }
    root = canonical.string();
  }
  options.capacity = *bytes;
  options.capacity_file = capacity_file;
  options.threads = threads;
  options.loading_threads = loading_threads;
  options.repositories = repositories;
  // Model code that does not return cannot be stopped inside its thread: the process ends, and
  // warmd fails the model that was running and starts the runtime again.
  options.limits.cpu =
      std::chrono::milliseconds(static_cast<std::int64_t>(call_cpu_seconds * 1000));
  options.limits.running =
      std::chrono::milliseconds(static_cast<std::int64_t>(call_seconds * 1000));
  options.on_runaway = [](const std::string& model, const std::string& why) {
    std::cerr << "warm-runtime: model " << model << " " << why
              << ": exiting, since its thread cannot be stopped" << std::endl;
    std::_Exit(exit_runaway);
  };
  warm::set_backend_threads(static_cast<int>(backend_threads));
  warm::code_policy code;
  code.in_process = true;  // this process is where models' code runs: it confines itself below
  warm::set_code_policy(code);

  const char* fd = std::getenv("WARM_RUNTIME_FD");
  if (listen.empty()) {
    if (!fd) {
      std::cerr << "warm-runtime: no WARM_RUNTIME_FD (warmd --runtime starts it) and no --listen "
                   "unix:PATH\n";
      return 2;
    }
    close_from(std::max(3, std::atoi(fd)) + 1);
  } else if (listen.rfind("unix:", 0) != 0 || listen.size() == 5) {
    std::cerr << "warm-runtime: --listen takes unix:PATH\n";
    return 2;
  }
  if (repositories.empty())
    std::cerr << "warm-runtime: no repository (--repo): every load will be refused\n";
  int listen_fd = -1;
  if (!listen.empty() && (listen_fd = bind_socket(listen.substr(5))) < 0) return 1;
  // Its resident memory goes into every status (warmd charges what exceeds its models'); the
  // sandbox hides /proc, so the file is opened now and read again and again.
  options.statm_fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (!no_sandbox) {
    const std::uint64_t limit = *memory ? *memory : 4 * *bytes + (std::uint64_t{8} << 30);
    auto policy = runtime_sandbox(repositories, capacity_file, limit, ::geteuid() == 0 ? user : "");
    auto applied = warm::sandbox::sandbox_self(policy);
    if (!applied) {
      std::cerr << "warm-runtime: cannot sandbox itself: " << applied.error().message
                << " (--no-sandbox serves unconfined)\n";
      return 1;
    }
    for (const auto& note : applied->notes)  // a system path this machine lacks is no news
      if (note.rfind("Landlock: no such path", 0) != 0)
        std::cerr << "warm-runtime: sandbox: " << note << "\n";
  } else {
    std::cerr << "warm-runtime: WARNING: --no-sandbox: models' code runs with every right of this "
                 "process\n";
  }
  try {
    if (!listen.empty()) return serve_socket(options, listen_fd, listen.substr(5));
    return serve_fd(options, std::atoi(fd));
  } catch (const kj::Exception& e) {
    std::cerr << "warm-runtime: " << e.getDescription().cStr() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "warm-runtime: " << e.what() << "\n";
    return 1;
  }
}
