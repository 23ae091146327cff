// warm-mmesh: the bridge between warmd and a model runtime that speaks ModelMesh's model-runtime
// SPI (schemas/model_runtime.proto) and KServe V2 inference (schemas/kserve_v2.proto) over gRPC.
// warmd runs it as a supervised model runtime (docs/runtimes.md): it serves schemas/runtime.capnp
// on the socket in WARM_RUNTIME_FD and translates every call to the gRPC runtime (bridge.hpp).
//
//   warm-mmesh --connect unix:/run/mlserver.sock    a runtime someone else runs ("host:port" too)
//   warm-mmesh --exec 'mlserver start ...'          a runtime of its own, in a private directory,
//                                                    told to listen at WARM_GRPC_ADDRESS
//
// With --exec, the runtime's end is the bridge's: "warm-mmesh: the runtime exited with status N"
// (or "was killed by signal S (SIGSEGV)") on stderr, and the bridge exits the same way, so that
// warmd, which supervises it, sees the runtime's death. When warmd closes the socket (or on
// SIGTERM/SIGINT) the bridge stops the runtime, removes its directory and exits 0.
#include <capnp/rpc-twoparty.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "bridge.hpp"
#include "child_process.hpp"

namespace {

// Closes every descriptor from `first` up: nothing warmd held open reaches the runtime.
void close_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, ~0u, 0) == 0) return;
#endif
  for (int fd = first; fd < 65536; ++fd)
    ::close(fd);
}

// The runtime's channel: quick reconnects (a runtime starting up, or restarted, is found within a
// second) and messages as large as the link to warmd carries.
std::shared_ptr<grpc::Channel> open_channel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

std::vector<std::string> split_kinds(const std::string& text) {
  std::vector<std::string> kinds;
  std::stringstream list(text);
  for (std::string kind; std::getline(list, kind, ',');)
    if (!kind.empty()) kinds.push_back(kind);
  return kinds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "warm-mmesh: serves warm's model-runtime interface (WARM_RUNTIME_FD) with a "
      "ModelMesh model runtime over gRPC"};
  std::string connect, exec, kinds_text = "*";
  auto* connect_opt =
      app.add_option("--connect", connect, "the runtime's gRPC address: unix:/path or host:port");
  auto* exec_opt = app.add_option(
      "--exec", exec,
      "start the runtime: /bin/sh -c 'exec COMMAND', listening at $WARM_GRPC_ADDRESS");
  connect_opt->excludes(exec_opt);
  warm::mmesh::confinement_options confine;
  bool no_confine = false;
  app.add_flag("--no-confine", no_confine,
               "run the --exec runtime unconfined (also WARM_MMESH_CONFINE=0): a model's code "
               "gets every right of this process");
  app.add_option("--read", confine.read,
                 "a path the confined runtime may also read (repeatable; also WARM_MMESH_READ, "
                 "colon-separated)");
  app.add_option("--user", confine.user, "started as root, the confined runtime runs as this user")
      ->capture_default_str();
  app.add_option("--kinds", kinds_text,
                 "model kinds reported to warmd, comma-separated ('*': every kind no built-in "
                 "backend serves)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (connect.empty() == exec.empty()) {
    std::cerr << "warm-mmesh: give --connect ADDR or --exec COMMAND\n";
    return 2;
  }
  auto kinds = split_kinds(kinds_text);
  if (kinds.empty() || kinds.size() > 64) {
    std::cerr << "warm-mmesh: --kinds takes 1 to 64 kinds\n";
    return 2;
  }
  const char* fd_text = std::getenv("WARM_RUNTIME_FD");
  const int fd = fd_text ? std::atoi(fd_text) : -1;
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) {
    std::cerr << "warm-mmesh: WARM_RUNTIME_FD names no open socket (warmd --runtime "
                 "NAME=grpc:ADDR or grpc-exec:COMMAND starts it)\n";
    return 2;
  }
  close_from(std::max(3, fd + 1));
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // the runtime never holds warmd's socket

  // Before any thread (gRPC's, the child's fork): kj sees these signals and the child's end.
  kj::UnixEventPort::captureChildExit();
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);

  if (const char* text = std::getenv("WARM_MMESH_CONFINE")) {
    auto on = warm::mmesh::parse_confine_env(text);
    if (!on) {
      std::cerr << "warm-mmesh: " << on.error().message << "\n";
      return 2;
    }
    if (!*on) no_confine = true;
  }
  if (const char* text = std::getenv("WARM_MMESH_READ"))
    for (auto& p : warm::mmesh::split_paths(text))
      confine.read.push_back(std::move(p));
  confine.enabled = !no_confine;

  std::unique_ptr<warm::mmesh::runtime_child> child;
  std::string target = connect;
  if (!exec.empty()) {
    if (!confine.enabled)
      std::cerr << "warm-mmesh: WARNING: the runtime runs unconfined (--no-confine or "
                   "WARM_MMESH_CONFINE=0): a model's code has every right of this process\n";
    auto started = warm::mmesh::runtime_child::start(exec, confine);
    if (!started) {
      std::cerr << "warm-mmesh: --exec: " << started.error().message << "\n";
      return 1;
    }
    child = std::move(*started);
    target = child->address();
  }

  int exit_status = 0;
  bool child_died = false;
  try {
    auto io = kj::setupAsyncIo();
    // Registered at once, before the loop runs, so that an exit is never missed.
    kj::Promise<int> child_exit = kj::NEVER_DONE;
    if (child) child_exit = io.unixEventPort.onChildExit(child->pid());

    warm::mmesh::bridge_options options;
    options.kinds = kinds;
    if (child) options.rss = [c = child.get()] { return c->rss_bytes(); };
    options.end_on_reconnect = !child;
    auto stream =
        io.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
    capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::SERVER);
    auto rpc = capnp::makeRpcServer(network, capnp::Capability::Client(warm::mmesh::make_bridge(
                                                 open_channel(target), std::move(options))));

    auto stop = io.unixEventPort.onSignal(SIGTERM)
                    .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                    .ignoreResult();
    auto died = child_exit.then([&](int status) {
      child_died = true;
      exit_status = status;
      std::cerr << "warm-mmesh: the runtime " << warm::mmesh::describe_wait_status(status)
                << std::endl;
    });
    network.onDisconnect()
        .exclusiveJoin(kj::mv(stop))
        .exclusiveJoin(kj::mv(died))
        .wait(io.waitScope);
  } catch (const kj::Exception& e) {
    std::cerr << "warm-mmesh: " << e.getDescription().cStr() << "\n";
    exit_status = 1 << 8;  // as a wait status: exit 1
  } catch (const std::exception& e) {
    std::cerr << "warm-mmesh: " << e.what() << "\n";
    exit_status = 1 << 8;
  }
  // The runtime goes first (and its directory): gRPC's threads and calls in flight are left to
  // the process's end, never destroyed under them.
  child.reset();
  if (child_died) warm::mmesh::end_like(exit_status);
  std::cout.flush();
  std::_Exit(WIFEXITED(exit_status) ? WEXITSTATUS(exit_status) : 1);
}
