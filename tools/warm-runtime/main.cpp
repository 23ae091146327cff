// warm-runtime: the reference model runtime (docs/runtimes.md). Serves schemas/runtime.capnp with
// warm's own backends, so that models (TorchScript ones above all) can run isolated from warmd:
//
//   warmd --runtime torch='build/warm-runtime --capacity 4GiB' ...   (warmd starts and supervises it)
//   build/warm-runtime --listen unix:/run/warm/torch.sock &           (started by someone else)
//   warmd --runtime torch=unix:/run/warm/torch.sock ...
//
// Started by warmd, it serves the connected socket in WARM_RUNTIME_FD and exits when warmd closes
// it. With --listen it serves every connection to the socket until SIGTERM or SIGINT.
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "server.hpp"
#include "warm/backend.hpp"
#include "warm/units.hpp"

namespace {

int serve_fd(warm::runtime_server_options options, int fd) {
  auto io = kj::setupAsyncIo();
  auto stream = io.lowLevelProvider->wrapSocketFd(fd, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::SERVER);
  auto rpc = capnp::makeRpcServer(network, capnp::Capability::Client(warm::make_runtime_server(options)));
  network.onDisconnect().wait(io.waitScope);
  return 0;
}

int serve_socket(warm::runtime_server_options options, const std::string& path) {
  // Before any thread starts (the server's workers), so that SIGTERM and SIGINT reach the loop.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  auto io = kj::setupAsyncIo();
  unlink(path.c_str());  // a socket left by an earlier run
  auto listener = io.provider->getNetwork().parseAddress(kj::str("unix:", path.c_str())).wait(io.waitScope)->listen();
  capnp::TwoPartyServer server(capnp::Capability::Client(warm::make_runtime_server(options)));
  auto serving = server.listen(*listener);
  // SIGTERM and SIGINT end it cleanly (the socket file is removed).
  auto stop = io.unixEventPort.onSignal(SIGTERM).exclusiveJoin(io.unixEventPort.onSignal(SIGINT));
  std::cerr << "warm-runtime: serving " << path << "\n";
  serving.exclusiveJoin(stop.ignoreResult()).wait(io.waitScope);
  unlink(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"warm-runtime: a model runtime serving warm's backends over schemas/runtime.capnp"};
  std::string capacity = "1GiB", listen, capacity_file;
  unsigned threads = 0, loading_threads = 1, backend_threads = 1;
  app.add_option("--capacity", capacity, "memory models may take (e.g. 4GiB)")->capture_default_str();
  app.add_option("--capacity-file", capacity_file,
                 "a file holding the capacity to report, read at every status (resizable while running)");
  app.add_option("--listen", listen, "serve unix:PATH instead of the socket warmd passes (WARM_RUNTIME_FD)");
  app.add_option("--threads", threads, "inference threads (0: one per core)")->capture_default_str();
  app.add_option("--loading-threads", loading_threads, "loads at once, 1..64")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--backend-threads", backend_threads, "threads one inference may use (BLAS, libtorch)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  warm::runtime_server_options options;
  auto bytes = warm::parse_bytes(capacity);
  if (!bytes || *bytes == 0) {
    std::cerr << "warm-runtime: --capacity: " << (bytes ? "must be positive" : bytes.error().message) << "\n";
    return 2;
  }
  options.capacity = *bytes;
  options.capacity_file = capacity_file;
  options.threads = threads;
  options.loading_threads = loading_threads;
  warm::set_backend_threads(static_cast<int>(backend_threads));
  try {
    if (!listen.empty()) {
      if (listen.rfind("unix:", 0) != 0 || listen.size() == 5) {
        std::cerr << "warm-runtime: --listen takes unix:PATH\n";
        return 2;
      }
      return serve_socket(options, listen.substr(5));
    }
    const char* fd = std::getenv("WARM_RUNTIME_FD");
    if (!fd) {
      std::cerr << "warm-runtime: no WARM_RUNTIME_FD (warmd --runtime starts it) and no --listen unix:PATH\n";
      return 2;
    }
    return serve_fd(options, std::atoi(fd));
  } catch (const kj::Exception& e) {
    std::cerr << "warm-runtime: " << e.getDescription().cStr() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "warm-runtime: " << e.what() << "\n";
    return 1;
  }
}
