#include "acceptor.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/debug.h>

#include "net/login_limiter.hpp"

namespace warm::warmd {

namespace {

// A byte stream that follows Cap'n Proto's framing on its read side (a segment table, then the
// segments) and fails the read that completes a segment table announcing a message over `limit`
// bytes while the gate is closed, before the message's body is read or allocated. Everything else
// passes through to the wrapped stream. Opening the gate (after a login) lifts the limit; the
// reader's own ReaderOptions still apply.
class gated_stream final : public kj::AsyncIoStream {
 public:
  // `peer` names the client in the log line of a refused frame.
  gated_stream(kj::Own<kj::AsyncIoStream> inner, std::uint64_t limit, std::string peer)
      : inner_(kj::mv(inner)), limit_(limit), peer_(std::move(peer)) {}

  void open() { open_ = true; }

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return inner_->tryRead(buffer, min_bytes, max_bytes).then([this, buffer](size_t n) {
      scan(static_cast<const kj::byte*>(buffer), n);
      return n;
    });
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, kj::uint* length) override {
    inner_->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, kj::uint* length) override {
    inner_->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return inner_->getFd(); }

 private:
  static std::uint32_t le32(const kj::byte* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
           std::uint32_t(p[3]) << 24;
  }

  // Advances the framing state over `n` bytes just read; throws when a closed gate meets a frame
  // over the limit.
  void scan(const kj::byte* p, size_t n) {
    while (n > 0) {
      if (body_left_ > 0) {
        auto k = static_cast<size_t>(std::min<std::uint64_t>(body_left_, n));
        body_left_ -= k;
        p += k;
        n -= k;
        continue;
      }
      // A segment table: 4 bytes of (segments - 1), 4 per segment, padded to 8.
      table_.push_back(*p++);
      --n;
      if (table_.size() == 4) {
        std::uint64_t segments = std::uint64_t{le32(table_.data())} + 1;
        // Cap'n Proto refuses more than 512 segments itself; this bounds the table kept here.
        if (segments > 512) fail(segments * 8);
        table_bytes_ = (4 + 4 * segments + 7) / 8 * 8;
      }
      if (table_.size() >= 8 && table_.size() == table_bytes_) {
        std::uint64_t segments = std::uint64_t{le32(table_.data())} + 1;
        std::uint64_t words = 0;
        for (std::uint64_t i = 0; i < segments; ++i)
          words += le32(table_.data() + 4 + 4 * i);
        table_.clear();
        table_bytes_ = 0;
        if (!open_ && words * 8 > limit_) fail(words * 8);
        body_left_ = words * 8;
      }
    }
  }

  [[noreturn]] void fail(std::uint64_t bytes) {
    spdlog::warn(
        "rpc: closing a connection from {}: message too large before login ({} bytes, the limit is "
        "{})",
        peer_, bytes, limit_);
    KJ_FAIL_REQUIRE("message too large before login", bytes, limit_);
  }

  kj::Own<kj::AsyncIoStream> inner_;
  std::uint64_t limit_;
  std::string peer_;
  bool open_ = false;
  std::vector<kj::byte> table_;  // the segment table read so far
  std::uint64_t table_bytes_ = 0;
  std::uint64_t body_left_ = 0;  // bytes of the current message's segments still to come
};

class log_errors final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& e) override {
    spdlog::warn("rpc: {}", e.getDescription().cStr());
  }
};

// The peer's IP address ("unix" for a unix socket; "?" when unknown): the login limiter's key.
std::string peer_of(kj::AsyncIoStream& stream) {
  sockaddr_storage addr{};
  kj::uint length = sizeof(addr);
  try {
    stream.getpeername(reinterpret_cast<sockaddr*>(&addr), &length);
  } catch (const kj::Exception&) {
    return "?";
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof(text));
  else if (addr.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof(text));
  else if (addr.ss_family == AF_UNIX)
    return "unix";
  else
    return "?";
  return text;
}

}  // namespace

std::string refuse_pending_login(const connection_counts& counts, const std::string& peer,
                                 std::uint32_t max) {
  if (counts.unauthenticated >= max)
    return std::to_string(counts.unauthenticated) + " connections wait to log in";
  auto it = counts.unauthenticated_by_peer.find(peer);
  const std::uint32_t mine = it == counts.unauthenticated_by_peer.end() ? 0 : it->second;
  const std::uint32_t per_peer = std::max<std::uint32_t>(1, max / 8);
  if (mine >= per_peer)
    return std::to_string(mine) + " connections from this address wait to log in (at most " +
           std::to_string(per_peer) + " per address)";
  if (mine > 0 && counts.unauthenticated >= max - max / 4)
    return std::to_string(counts.unauthenticated) +
           " connections wait to log in; the rest are kept for addresses with none waiting";
  return {};
}

// One accepted connection: its stream, network and RPC system, and its place in the counts.
struct rpc_acceptor::connection {
  connection(kj::Own<gated_stream> s, capnp::ReaderOptions options, connection_counts& c,
             bool needs_login, std::set<connection*>& l, std::string from)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, options),
        counts(c),
        live(l),
        pending_login(needs_login),
        peer(std::move(from)) {
    ++counts.open;
    if (pending_login) {
      ++counts.unauthenticated;
      ++counts.unauthenticated_by_peer[peer];
    }
    live.insert(this);
  }
  ~connection() {
    live.erase(this);
    --counts.open;
    logged_in();
  }
  // The client logged in (or the connection ends): it no longer counts as pending.
  void logged_in() {
    if (!pending_login) return;
    pending_login = false;
    --counts.unauthenticated;
    auto it = counts.unauthenticated_by_peer.find(peer);
    if (it != counts.unauthenticated_by_peer.end() && --it->second == 0)
      counts.unauthenticated_by_peer.erase(it);
  }

  kj::Own<gated_stream> stream;
  capnp::TwoPartyVatNetwork network;
  kj::Maybe<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
  connection_counts& counts;
  std::set<connection*>& live;
  bool pending_login;
  std::string peer;
};

rpc_acceptor::rpc_acceptor(warm::runtime& rt, kj::Timer& timer, acceptor_options options,
                           rpc::in_flight_counter in_flight,
                           std::shared_ptr<std::uint32_t> all_watchers, connection_counts& counts)
    : rt_(rt),
      timer_(timer),
      options_(std::move(options)),
      in_flight_(std::move(in_flight)),
      all_watchers_(std::move(all_watchers)),
      counts_(counts),
      errors_(kj::heap<log_errors>()),
      tasks_(kj::heap<kj::TaskSet>(*errors_)) {}

rpc_acceptor::~rpc_acceptor() {
  tasks_ = nullptr;
}  // closes the connections before the rest

kj::Promise<void> rpc_acceptor::listen(kj::ConnectionReceiver& receiver) {
  // evalNow: kj's accept() throws at once when accept(2) fails; as a rejected promise it is caught
  // below.
  return kj::evalNow([&receiver] { return receiver.accept(); })
      .then(
          [this, &receiver](kj::Own<kj::AsyncIoStream>&& stream) {
            if (accept_pause_.count()) spdlog::info("accepting connections again");
            accept_pause_ = std::chrono::milliseconds(0);
            serve(kj::mv(stream));
            return listen(receiver);
          },
          [this, &receiver](kj::Exception&& e) {
            bool first = accept_pause_.count() == 0;
            accept_pause_ = first ? std::chrono::milliseconds(10)
                                  : std::min(2 * accept_pause_, std::chrono::milliseconds(1000));
            if (first ||
                accept_pause_.count() == 1000)  // the first failure, then at most one line a second
              spdlog::warn("accept failed ({}); trying again in {} ms, {} connections open",
                           e.getDescription().cStr(), accept_pause_.count(), counts_.open);
            return timer_.afterDelay(accept_pause_.count() * kj::MILLISECONDS)
                .then([this, &receiver] { return listen(receiver); });
          });
}

std::size_t rpc_acceptor::unsent_messages() const {
  std::size_t n = 0;
  for (auto* c : live_)
    n += c->network.getCurrentQueueCount();
  return n;
}

// A TLS handshake in progress: counted as an open connection (and, with a token, as a pending
// login of its peer) until it ends either way.
struct rpc_acceptor::handshake {
  handshake(connection_counts& c, std::string from, bool pending)
      : counts(c), peer(std::move(from)), pending_login(pending) {
    ++counts.open;
    if (pending_login) {
      ++counts.unauthenticated;
      ++counts.unauthenticated_by_peer[peer];
    }
  }
  ~handshake() {
    --counts.open;
    if (!pending_login) return;
    --counts.unauthenticated;
    auto it = counts.unauthenticated_by_peer.find(peer);
    if (it != counts.unauthenticated_by_peer.end() && --it->second == 0)
      counts.unauthenticated_by_peer.erase(it);
  }
  KJ_DISALLOW_COPY(handshake);

  connection_counts& counts;
  std::string peer;
  bool pending_login;
};

void rpc_acceptor::serve(kj::Own<kj::AsyncIoStream>&& raw) {
  bool needs_login = !options_.token.empty();
  std::string peer = peer_of(*raw);
  if (counts_.open >= options_.max_connections) {
    spdlog::warn("rpc: closing a connection from {}: {} connections are open (--max-connections)",
                 peer, counts_.open);
    return;  // dropping the stream closes it
  }
  if (needs_login) {
    if (auto why = refuse_pending_login(counts_, peer, options_.max_unauthenticated);
        !why.empty()) {
      spdlog::warn("rpc: closing a connection from {}: {} (--max-pending-logins)", peer, why);
      return;
    }
  }
  if (!options_.tls) return start(kj::mv(raw), peer);
  auto tls = options_.tls();
  auto slot = kj::heap<handshake>(counts_, peer, needs_login);
  tasks_->add(
      tls->context->wrapServer(kj::mv(raw))
          .then(
              [this, peer, slot = kj::mv(slot)](kj::Own<kj::AsyncIoStream>&& stream) mutable {
                slot = nullptr;  // counted again, as the connection, by start
                start(kj::mv(stream), peer);
              },
              [this, peer](kj::Exception&& e) {
                // At most one line a second: a client cannot fill the log with failures.
                auto now = std::chrono::steady_clock::now();
                if (now - last_handshake_log_ < std::chrono::seconds(1)) return;
                last_handshake_log_ = now;
                spdlog::warn("rpc: TLS handshake with {} failed: {}", peer,
                             e.getDescription().cStr());
              })
          .attach(kj::mv(tls)));
}

void rpc_acceptor::start(kj::Own<kj::AsyncIoStream>&& raw, const std::string& peer) {
  bool needs_login = !options_.token.empty();
  auto stream = kj::heap<gated_stream>(kj::mv(raw), login_message_bytes, peer);
  if (!needs_login) stream->open();
  auto c =
      kj::heap<connection>(kj::mv(stream), options_.receive, counts_, needs_login, live_, peer);
  rpc::Warm::Client warm =
      kj::heap<rpc::warm_server>(rt_, options_.server, in_flight_, all_watchers_);
  capnp::Capability::Client bootstrap = warm;
  auto* raw_c = c.get();
  if (needs_login) {
    rpc::login_options login;
    login.limiter = options_.limiter;
    login.peer = peer;
    login.cluster_address = options_.cluster_address;
    login.on_login = [raw_c] {  // the authenticator lives in the connection's RPC system
      raw_c->stream->open();
      raw_c->logged_in();
    };
    bootstrap = kj::heap<rpc::authenticator>(options_.token, kj::mv(warm), kj::mv(login));
  }
  c->rpc = capnp::makeRpcServer(c->network, kj::mv(bootstrap));
  kj::Promise<void> ends = c->network.onDisconnect();
  if (needs_login) {
    auto timeout = options_.login_timeout;
    auto deadline =
        timer_
            .afterDelay(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count() *
                        kj::NANOSECONDS)
            .then([raw_c]() -> kj::Promise<void> {
              if (!raw_c->pending_login) return kj::NEVER_DONE;
              spdlog::warn("rpc: closing a connection from {}: no login within --login-timeout",
                           raw_c->peer);
              return kj::READY_NOW;
            });
    ends = ends.exclusiveJoin(kj::mv(deadline));
  }
  tasks_->add(ends.attach(kj::mv(c)));
}

}  // namespace warm::warmd
