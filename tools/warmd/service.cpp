#include "service.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/thread.h>

#include "acceptor.hpp"
#include "net/listen.hpp"
#include "net/loopback.hpp"
#include "net/tls.hpp"
#include "rpc/tls_context.hpp"
#include "warm/runtime.hpp"

namespace warm::warmd {

expected<listen_address> parse_listen_address(const std::string& text) {
  listen_address a;
  a.text = text;
  if (text.rfind("unix:", 0) == 0) {
    a.is_unix = true;
    a.path = text.substr(5);
    if (a.path.empty())
      return make_error(errc::invalid_argument, "listen address \"" + text + "\" has no path");
    if (a.path.size() >= sizeof(sockaddr_un::sun_path))
      return make_error(errc::invalid_argument, "unix socket path \"" + a.path + "\" is too long");
    return a;
  }
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return make_error(errc::invalid_argument,
                      "listen address \"" + text + "\" is neither unix:PATH nor HOST:PORT");
  a.host = text.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  auto port_text = text.substr(colon + 1);
  unsigned long port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535)
      return make_error(errc::invalid_argument, "listen address \"" + text + "\" has a bad port");
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  if (port > 65535)
    return make_error(errc::invalid_argument, "listen address \"" + text + "\" has a bad port");
  a.port = static_cast<std::uint16_t>(port);
  return a;
}

bool is_loopback_host(const std::string& host) {
  return net::is_loopback_host(host);
}

namespace {

// A unix socket path that exists: replace it when nobody accepts on it, refuse otherwise.
expected<void> clear_stale_socket(const std::string& path) {
  struct stat st {};
  const bool there = ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  if (auto why = net::clear_stale_socket(path); !why.empty())
    return make_error(
        why.find("not a socket") != std::string::npos ? errc::invalid_argument : errc::unavailable,
        why);
  if (there) spdlog::info("removed stale socket {}", path);
  return {};
}

}  // namespace

capnp::ReaderOptions receive_options(const rpc::server_options& server) {
  capnp::ReaderOptions options;
  std::uint64_t words = server.max_request_bytes / 8;
  constexpr std::uint64_t headroom_words = std::uint64_t{1} << 17;  // 1 MiB: the RPC envelope
  constexpr std::uint64_t most_words = std::uint64_t{1} << 61;      // no overflow below
  words = std::min(words, most_words / receive_read_factor);
  options.traversalLimitInWords = words * receive_read_factor + headroom_words;
  return options;
}

struct service::impl {
  warm::runtime* rt = nullptr;
  service_options options;
  std::vector<listen_address> addresses;
  std::vector<std::string> bound;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop;  // set by the RPC thread once it runs
  kj::Own<kj::Thread> thread;
  bool stopped = false;
  // The RPC thread's executor while its loop runs (set_tls), under `executor_lock`.
  std::mutex executor_lock;
  const kj::Executor* executor = nullptr;
  // The TLS context new TCP connections get; RPC thread only.
  std::shared_ptr<rpc::tls_server> tls;
  kj::Timer* timer = nullptr;  // the RPC thread's, while it runs

  // The RPC thread's body. Reports the start (bound or the error) through `started`.
  void run(std::promise<expected<void>>& started) {
    bool reported = false;
    try {
      auto io = kj::setupAsyncIo();
      auto& net = io.provider->getNetwork();
      timer = &io.provider->getTimer();
      if (options.tls) tls = rpc::make_tls_server(*options.tls, *timer, options.login_timeout);
      auto in_flight = std::make_shared<std::atomic<std::uint64_t>>(0);
      auto all_watchers = std::make_shared<std::uint32_t>(0);
      connection_counts counts;
      auto server = options.server;  // every connection's, the relay made on this thread
      if (options.relay_factory) server.relay = options.relay_factory(*io.provider);

      struct listener {
        kj::Own<kj::ConnectionReceiver> receiver;
        kj::Own<rpc_acceptor> server;
        kj::Promise<void> accepting = nullptr;
        std::string unix_path;
      };
      std::vector<listener> listeners;
      for (const auto& a : addresses) {
        listener l;
        acceptor_options accepting;
        accepting.server = server;
        accepting.receive = receive_options(options.server);
        accepting.login_timeout = options.login_timeout;
        accepting.max_connections = options.max_connections;
        accepting.max_unauthenticated = options.max_pending_logins;
        accepting.limiter = options.limiter;
        if (a.is_unix) {
          if (auto ok = clear_stale_socket(a.path); !ok) {
            started.set_value(ok.error());
            return;
          }
          auto addr = net.parseAddress("unix:" + a.path).wait(io.waitScope);
          mode_t old = ::umask(0177);  // the socket file is born 0600
          try {
            l.receiver = addr->listen();
          } catch (...) {
            ::umask(old);
            throw;
          }
          ::umask(old);
          ::chmod(a.path.c_str(), 0600);
          l.unix_path = a.path;
          bound.push_back("unix:" + a.path);
        } else {
          auto addr = net.parseAddress(a.host, a.port).wait(io.waitScope);
          l.receiver = addr->listen();
          auto host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
          bound.push_back(host + ":" + std::to_string(l.receiver->getPort()));
          accepting.token = options.token;  // empty: no login (loopback only)
          accepting.cluster_address = options.cluster_address;
          if (tls) accepting.tls = [this] { return tls; };
        }
        l.server = kj::heap<rpc_acceptor>(*rt, io.provider->getTimer(), std::move(accepting),
                                          in_flight, all_watchers, counts);
        auto text = bound.back();
        l.accepting = l.server->listen(*l.receiver).eagerlyEvaluate([text](kj::Exception&& e) {
          spdlog::error("listener {} stopped: {}", text, e.getDescription().cStr());
        });
        listeners.push_back(kj::mv(l));
      }

      auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
      stop = kj::mv(paf.fulfiller);
      {
        std::lock_guard<std::mutex> hold(executor_lock);
        executor = &kj::getCurrentThreadExecutor();
      }
      started.set_value(expected<void>{});
      reported = true;
      paf.promise.wait(io.waitScope);
      {
        std::lock_guard<std::mutex> hold(executor_lock);
        executor = nullptr;  // set_tls from now on: unavailable
      }

      // Stop accepting; connections stay open while calls finish.
      for (auto& l : listeners) {
        l.accepting = nullptr;
        l.receiver = nullptr;
        if (!l.unix_path.empty()) ::unlink(l.unix_path.c_str());
      }
      auto deadline =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(options.drain_seconds);
      if (in_flight->load() > 0)
        spdlog::info("waiting for {} call(s) in flight", in_flight->load());
      // The calls' answers must also leave: a finished call's reply may still sit in its
      // connection's queue (a large one is written as the client reads it).
      auto unsent = [&] {
        std::size_t n = 0;
        for (auto& l : listeners)
          n += l.server->unsent_messages();
        return n;
      };
      while ((in_flight->load() > 0 || unsent() > 0) && std::chrono::steady_clock::now() < deadline)
        io.provider->getTimer().afterDelay(10 * kj::MILLISECONDS).wait(io.waitScope);
      if (in_flight->load() > 0 || unsent() > 0)
        spdlog::warn("{} call(s) still in flight, {} answer(s) unsent; closing anyway",
                     in_flight->load(), unsent());
      listeners.clear();  // closes the connections: watch handles unwatch, calls are cancelled
    } catch (const kj::Exception& e) {
      if (!reported)
        started.set_value(make_error(errc::unavailable, e.getDescription().cStr()));
      else
        spdlog::error("rpc thread: {}", e.getDescription().cStr());
    } catch (const std::exception& e) {
      if (!reported)
        started.set_value(make_error(errc::internal, e.what()));
      else
        spdlog::error("rpc thread: {}", e.what());
    }
  }
};

expected<std::unique_ptr<service>> service::start(warm::runtime& rt, service_options options) {
  auto i = std::make_unique<impl>();
  i->rt = &rt;
  if (options.listen.empty()) return make_error(errc::invalid_argument, "no listen address");
  for (const auto& text : options.listen) {
    auto a = parse_listen_address(text);
    if (!a) return a.error();
    if (!a->is_unix && !options.allow_remote && !is_loopback_host(a->host))
      return make_error(
          errc::invalid_argument,
          "listen address " + text + " is not loopback; remote access needs --allow-remote");
    i->addresses.push_back(std::move(*a));
  }
  // TCP first: a unix socket is what local clients and warmd's own tests poll for readiness, so
  // by the time one accepts, every TCP listener does too.
  std::stable_partition(i->addresses.begin(), i->addresses.end(),
                        [](const listen_address& a) { return !a.is_unix; });
  if (options.allow_remote && options.token.empty())
    return make_error(errc::invalid_argument, "--allow-remote needs a token (--token-file)");
  i->options = std::move(options);

  std::promise<expected<void>> started;
  auto ready = started.get_future();
  auto* raw = i.get();
  i->thread = kj::heap<kj::Thread>([raw, &started] { raw->run(started); });
  auto result = ready.get();
  if (!result) {
    i->thread = nullptr;  // the thread has returned: join it
    return result.error();
  }
  return std::unique_ptr<service>(new service(std::move(i)));
}

service::service(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

service::~service() {
  stop();
}

void service::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stop->fulfill();
  impl_->thread = nullptr;  // joins
  impl_->stop = nullptr;
}

const std::vector<std::string>& service::bound() const {
  return impl_->bound;
}

expected<void> service::set_tls(std::shared_ptr<const net::tls_material> material) {
  if (!impl_->options.tls || !material)
    return make_error(errc::invalid_argument, "the Cap'n Proto listeners were started without TLS");
  std::lock_guard<std::mutex> hold(impl_->executor_lock);  // the loop runs while it is held
  if (!impl_->executor) return make_error(errc::unavailable, "the RPC thread has stopped");
  auto* i = impl_.get();
  return impl_->executor->executeSync([i, &material]() -> expected<void> {
    try {
      i->tls = rpc::make_tls_server(*material, *i->timer, i->options.login_timeout);
      return {};
    } catch (const kj::Exception& e) {
      return make_error(errc::invalid_argument, std::string("TLS: ") + e.getDescription().cStr());
    }
  });
}

}  // namespace warm::warmd
