// Black-box tests of what a Cap'n Proto client can make warmd hold: connections before login
// (the message size before login, --max-pending-logins, --max-connections, --login-timeout),
// failed logins (logged, limited per address by --max-failed-logins on both fronts), running out
// of file descriptors (both listeners pause and accept again), and watch
// streams (--max-watchers-per-connection, --max-watchers, --max-queued-events with a listener
// that stops answering); and the daemon's promises about its socket, its request size and its
// stop: a live unix socket in use exits 1, a stale one is replaced; a message over
// --max-request-bytes is answered tooLarge by the request-size check; SIGTERM while inferences
// are in flight lets them finish and exits 0; the files warmd trusts (token file, state
// directory). The real build/warmd ($WARMD) on a temporary directory, driven over Cap'n Proto and
// raw sockets.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rpc/convert.hpp"
#include "support/warmd_process.hpp"

namespace fs = std::filesystem;
namespace r = warm::rpc;
using Code = warm::rpc::Status::Code;
using warm::test::warmd_process;

namespace {

const std::string token = "0123456789abcdef-the-right-token";

// A raw TCP connection to 127.0.0.1:port, closed on destruction.
struct raw_socket {
  // Connects to 127.0.0.1:port from `source`, another loopback address (Linux routes all of
  // 127/8 to lo), so that a test can be several clients.
  explicit raw_socket(std::uint16_t port, const char* source = nullptr) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    if (source) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      REQUIRE(::inet_pton(AF_INET, source, &from.sin_addr) == 1);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  explicit raw_socket(const std::string& unix_path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, unix_path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~raw_socket() { ::close(fd); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  // True once the server has closed the connection (EOF or reset) within `limit`.
  bool closed_within(std::chrono::milliseconds limit) const {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() < 0) return false;
      pollfd p{fd, POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left.count()));
      if (n == 0) return false;
      if (n < 0) continue;
      char buffer[4096];
      auto got = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
  }
  // True while the connection is open: nothing (no EOF, no reset) is waiting to be read.
  bool open_now() const {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  // Sends as much of `bytes` as the server takes; false once it refuses (closed or reset).
  bool send_all(const void* data, std::size_t size) const {
    auto* p = static_cast<const char*>(data);
    while (size > 0) {
      auto n = ::send(fd, p, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }

  int fd = -1;
};

// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
std::uint64_t proc_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  FAIL("no " << field << " in /proc/" << pid << "/status");
  return 0;
}

std::string write_token(const fs::path& path) {
  std::ofstream(path) << token << "\n";
  fs::permissions(path,
                  fs::perms::owner_read | fs::perms::owner_write);  // warmd refuses a looser one
  return path.string();
}

// warmd with a unix listener and a remote-style TCP listener (an Authenticator bootstrap).
struct remote_daemon {
  explicit remote_daemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--listen", "127.0.0.1:0", "--allow-remote", "--token-file",
                                  write_token(d.dir() / "token")};
    args.insert(args.end(), extra.begin(), extra.end());
    d.log_level = "info";
    d.start(args);
    port = d.announced_port("listening on 127.0.0.1:");
  }
  warmd_process d;
  std::uint16_t port = 0;
};

// A Cap'n Proto client over TCP that has logged in.
struct logged_in {
  explicit logged_in(std::uint16_t port) : ez("127.0.0.1", port) {
    auto req = ez.getMain<r::Authenticator>().authenticateRequest();
    req.setToken(token);
    auto res = req.send().wait(ez.getWaitScope());
    REQUIRE(res.getStatus().getCode() == Code::OK);
    warm = res.getWarm();
  }
  // A status call (an unknown id answers ok with state notFound): true when it worked.
  bool works() {
    auto req = warm.getModelStatusRequest();
    req.setId("no-such-model");
    auto res = req.send().wait(ez.getWaitScope());
    return res.getStatus().getCode() == Code::OK &&
           res.getModel().getState() == r::ModelState::NOT_FOUND;
  }
  capnp::EzRpcClient ez;
  r::Warm::Client warm = nullptr;
};

// A Cap'n Proto frame header: one segment of `bytes` (rounded down to words).
std::vector<char> frame_header(std::uint64_t bytes) {
  std::uint32_t words[2] = {0, static_cast<std::uint32_t>(bytes / 8)};
  std::vector<char> out(8);
  std::memcpy(out.data(), words, 8);
  return out;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("before login a message over 64 KiB closes the connection before its body is held") {
  remote_daemon rd;
  auto before = proc_kib(rd.d.pid(), "VmHWM");
  {
    // Four connections each announce 250 MiB (within the post-login limit) and send 48 MiB of it.
    std::vector<std::unique_ptr<raw_socket>> attackers;
    std::vector<char> chunk(1 << 20, 0);
    for (int i = 0; i < 4; ++i) {
      attackers.push_back(std::make_unique<raw_socket>(rd.port));
      auto header = frame_header(std::uint64_t{250} << 20);
      bool sent = attackers.back()->send_all(header.data(), header.size());
      for (int k = 0; sent && k < 48; ++k)
        sent = attackers.back()->send_all(chunk.data(), chunk.size());
      CHECK(attackers.back()->closed_within(std::chrono::seconds(10)));
    }
  }
  auto after = proc_kib(rd.d.pid(), "VmHWM");
  INFO("VmHWM before " << before << " KiB, after " << after << " KiB");
  CHECK(after < before + 32 * 1024);
  CHECK(rd.d.log().find("message too large before login") != std::string::npos);

  SECTION("the same size is read once the client has logged in") {
    logged_in c(rd.port);
    auto req = c.warm.registerModelRequest();
    req.setId(std::string(100 << 10, 'x'));  // a 100 KiB id: read, and refused by the id rules
    req.getInfo().setPath("m");
    CHECK(req.send().wait(c.ez.getWaitScope()).getStatus().getCode() == Code::INVALID_ARGUMENT);
    CHECK(c.works());
  }
  SECTION("an authenticate call over the limit is dropped, not answered") {
    capnp::EzRpcClient ez("127.0.0.1", rd.port);
    auto req = ez.getMain<r::Authenticator>().authenticateRequest();
    req.setToken(std::string(100 << 10, 'x'));
    CHECK_THROWS(req.send().wait(ez.getWaitScope()));
  }
  CHECK(rd.d.stop() == 0);
}

TEST_CASE("a connection past --max-pending-logins is closed; logged-in clients keep working") {
  remote_daemon rd({"--max-pending-logins", "2"});
  logged_in c(rd.port);  // logged in: no longer pending
  raw_socket a(rd.port, "127.0.0.2"), b(rd.port, "127.0.0.3");
  REQUIRE(c.works());  // a and b have been accepted by now (accepts are served in order)
  raw_socket third(rd.port, "127.0.0.4");
  CHECK(third.closed_within(std::chrono::seconds(10)));
  CHECK(a.open_now());
  CHECK(b.open_now());
  CHECK(c.works());
  CHECK(rd.d.log().find("--max-pending-logins") != std::string::npos);
  CHECK(rd.d.stop() == 0);
}

TEST_CASE(
    "one address holds an eighth of the pending logins; the last quarter is kept for new "
    "addresses") {
  // 16 pending logins: 2 per address, the last 4 only for addresses with none pending.
  remote_daemon rd({"--max-pending-logins", "16"});
  raw_socket hog1(rd.port, "127.0.0.2"), hog2(rd.port, "127.0.0.2");
  logged_in c(rd.port);  // served in order: hog1 and hog2 are accepted by now
  raw_socket hog3(rd.port, "127.0.0.2");
  CHECK(hog3.closed_within(std::chrono::seconds(10)));
  CHECK(hog1.open_now());
  CHECK(hog2.open_now());
  CHECK(rd.d.log().find("from 127.0.0.2: 2 connections from this address wait to log in (at most 2 "
                        "per address)") != std::string::npos);
  // Ten more addresses, one pending login each: 12 pending, the reserve begins.
  std::vector<std::unique_ptr<raw_socket>> others;
  for (int i = 10; i < 20; ++i)
    others.push_back(
        std::make_unique<raw_socket>(rd.port, ("127.0.0." + std::to_string(i)).c_str()));
  REQUIRE(c.works());
  raw_socket second(rd.port, "127.0.0.10");  // has one pending: the reserve is not for it
  CHECK(second.closed_within(std::chrono::seconds(10)));
  CHECK(rd.d.log().find("the rest are kept for addresses with none waiting") != std::string::npos);
  raw_socket fresh(rd.port, "127.0.0.30");  // has none: gets in
  REQUIRE(c.works());
  CHECK(fresh.open_now());
  logged_in late(rd.port);  // a client with the token still logs in
  CHECK(late.works());
  CHECK(rd.d.stop() == 0);
}

TEST_CASE("a connection past --max-connections is closed, on every listener") {
  warmd_process d;
  d.start({"--max-connections", "2"});
  capnp::EzRpcClient c(d.address());
  auto warm = c.getMain<r::Warm>();
  auto status = [&] {
    auto req = warm.getModelStatusRequest();
    req.setId("x");
    return req.send().wait(c.getWaitScope()).getStatus().getCode();
  };
  REQUIRE(status() == Code::OK);  // connected and served
  // warmd_process::start's readiness probe (a connection it closes at once) may still count for a
  // moment, so that a second connection is the one refused: then the next round shows the rule.
  bool shown = false;
  for (int round = 0; round < 3 && !shown; ++round) {
    raw_socket second(d.socket());
    REQUIRE(status() == Code::OK);
    raw_socket third(d.socket());
    shown = third.closed_within(std::chrono::seconds(10)) && second.open_now();
  }
  CHECK(shown);
  CHECK(status() == Code::OK);
  CHECK(d.log().find("2 connections are open (--max-connections)") != std::string::npos);
  CHECK(d.stop() == 0);
}

TEST_CASE("a connection not logged in within --login-timeout is closed; a logged-in one stays") {
  remote_daemon rd({"--login-timeout", "300ms"});
  logged_in c(rd.port);
  auto start = std::chrono::steady_clock::now();
  raw_socket idle(rd.port);
  CHECK(idle.closed_within(std::chrono::seconds(20)));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(250));
  CHECK(c.works());  // connected before the idle one, past the same timeout
  CHECK(rd.d.log().find("no login within --login-timeout") != std::string::npos);
  CHECK(rd.d.stop() == 0);
}

// An HTTP/1.1 request on a raw socket: the status code of the answer.
int http_status(std::uint16_t port, const std::string& path, const std::string& bearer) {
  raw_socket s(port);
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!bearer.empty()) request += "Authorization: Bearer " + bearer + "\r\n";
  request += "\r\n";
  REQUIRE(s.send_all(request.data(), request.size()));
  std::string answer;
  char buffer[4096];
  for (;;) {
    pollfd p{s.fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 20000) == 1);
    auto n = ::recv(s.fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  REQUIRE(answer.rfind("HTTP/1.1 ", 0) == 0);
  return std::stoi(answer.substr(9, 3));
}

TEST_CASE("failed logins are logged without the token and limited per address on both fronts") {
  remote_daemon rd({"--max-failed-logins", "3", "--http", "127.0.0.1:0"});
  auto http_port = rd.d.announced_port("serving HTTP on 127.0.0.1:");
  const std::string wrong = "0123456789abcdef-a-wrong-guess";
  capnp::EzRpcClient ez("127.0.0.1", rd.port);
  auto& ws = ez.getWaitScope();
  auto auth = ez.getMain<r::Authenticator>();
  auto login = [&](const std::string& t) {
    auto req = auth.authenticateRequest();
    req.setToken(t);
    auto res = req.send().wait(ws);
    return std::make_pair(res.getStatus().getCode(),
                          std::string(res.getStatus().getMessage().cStr()));
  };
  CHECK(login(wrong) == std::make_pair(Code::UNAUTHENTICATED, std::string("wrong token")));
  CHECK(login(wrong) == std::make_pair(Code::UNAUTHENTICATED, std::string("wrong token")));
  CHECK(http_status(http_port, "/metrics", wrong) == 401);  // the third failure, on HTTP
  // The budget is spent: wrong tokens are refused with when to retry, on both fronts...
  auto refused = login(wrong);
  CHECK(refused.first == Code::UNAUTHENTICATED);
  CHECK(refused.second.find("too many failed logins") != std::string::npos);
  CHECK(http_status(http_port, "/metrics", wrong) == 429);
  // ...but the right token is not: a shared address (a NAT, a proxy) keeps its good clients.
  CHECK(login(token).first == Code::OK);
  CHECK(http_status(http_port, "/metrics", token) == 200);
  CHECK(http_status(http_port, "/v2/health/live", "") == 200);  // health needs no login

  auto log = rd.d.log();
  CHECK(count(log, "rpc: failed login from 127.0.0.1: wrong token") == 2);
  CHECK(count(log, "http: failed login from 127.0.0.1: wrong token") == 1);
  CHECK(count(log, "login refused from 127.0.0.1: too many failed logins") == 2);
  CHECK(log.find(wrong) == std::string::npos);
  CHECK(log.find(token) == std::string::npos);
  CHECK(rd.d.stop() == 0);
}

namespace {

// Records the events a watch delivers; while `hold` is set it leaves each call unanswered (a
// client that stopped reading its events) until release().
class listener final : public r::StateListener::Server {
 public:
  std::vector<std::pair<warm::model_event, std::uint64_t>> events;  // and each one's `missed`
  bool hold = false;

  void release() {
    hold = false;
    for (auto& f : held_)
      f->fulfill();
    held_.clear();
  }

 protected:
  kj::Promise<void> modelStateChanged(ModelStateChangedContext context) override {
    auto e = context.getParams().getEvent();
    events.emplace_back(r::from_capnp(e), e.getMissed());
    if (!hold) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    held_.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

 private:
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> held_;
};

struct unix_client {
  explicit unix_client(const std::string& address) : ez(address), warm(ez.getMain<r::Warm>()) {}
  kj::WaitScope& ws() { return ez.getWaitScope(); }
  // A watch call: its status code; the handle is kept in `handles` when it is ok.
  Code watch(listener*& out) {
    auto own = kj::heap<listener>();
    out = own.get();
    auto req = warm.watchRequest();
    req.setListener(kj::mv(own));
    auto res = req.send().wait(ws());
    if (res.getStatus().getCode() == Code::OK) handles.push_back(res.getHandle());
    return res.getStatus().getCode();
  }
  capnp::EzRpcClient ez;
  r::Warm::Client warm;
  std::vector<r::WatchHandle::Client> handles;
};

}  // namespace

TEST_CASE(
    "out of file descriptors, both listeners pause and accept again; neither stops for good") {
  warmd_process d;
  d.open_file_limit = 128;  // soft and hard: warmd cannot raise it
  d.log_level = "info";
  d.start({"--max-connections", "1000", "--http", "127.0.0.1:0"});
  auto http_port = d.announced_port("serving HTTP on 127.0.0.1:");
  {
    std::vector<std::unique_ptr<raw_socket>> held;
    for (int i = 0; i < 150; ++i)
      held.push_back(std::make_unique<raw_socket>(d.socket()));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (d.log().find("accept failed") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    INFO(d.log());
    REQUIRE(d.log().find("accept failed") != std::string::npos);  // it did run out
    // Out of descriptors, the HTTP front's accepts fail too (a few connections: the rest of them
    // would wait in its listen backlog of 5, and a connect past that waits for SYN retries).
    for (int i = 0; i < 3; ++i)
      held.push_back(std::make_unique<raw_socket>(http_port));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }  // every held connection closed: descriptors come back as warmd sees them end

  capnp::EzRpcClient c(d.address());
  auto req = c.getMain<r::Warm>().getModelStatusRequest();
  req.setId("x");
  auto answered = c.getIoProvider()
                      .getTimer()
                      .timeoutAfter(30 * kj::SECONDS, req.send())
                      .wait(c.getWaitScope());
  CHECK(answered.getStatus().getCode() == Code::OK);  // a new client is served
  CHECK(http_status(http_port, "/v2/health/live", "") == 200);
  CHECK(d.log().find("accepting connections again") != std::string::npos);
  CHECK(d.stop() == 0);
}

TEST_CASE("watch streams are limited per connection and in all") {
  warmd_process d;
  d.start({"--max-watchers-per-connection", "2", "--max-watchers", "3"});
  unix_client one(d.address()), two(d.address());
  listener* l = nullptr;
  CHECK(one.watch(l) == Code::OK);
  CHECK(one.watch(l) == Code::OK);
  CHECK(one.watch(l) == Code::CAPACITY_EXHAUSTED);  // the connection's limit
  CHECK(two.watch(l) == Code::OK);
  CHECK(two.watch(l) == Code::CAPACITY_EXHAUSTED);  // the server's limit
  // Dropping a handle gives its place back (its release reaches the server before the next call
  // on the same connection).
  one.handles.pop_back();
  CHECK(one.watch(l) == Code::OK);
  CHECK(two.watch(l) == Code::CAPACITY_EXHAUSTED);
  CHECK(d.stop() == 0);
}

TEST_CASE(
    "a watcher that stops answering holds a bounded queue and learns how many events it missed") {
  warmd_process d;
  for (int i = 0; i < 12; ++i)
    d.write_model("m" + std::to_string(i), {8, 4});
  d.start({"--max-queued-events", "4"});
  unix_client c(d.address());
  listener* l = nullptr;
  REQUIRE(c.watch(l) == Code::OK);
  l->hold = true;
  // Sync registrations with loadNow: each makes several events (queued, loading, loaded, ...).
  for (int i = 0; i < 12; ++i) {
    auto id = "m" + std::to_string(i);
    auto req = c.warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath(id);
    req.setLoadNow(true);
    req.setSync(true);
    REQUIRE(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
  }
  // Everything that happened is now either in the first (held) batch or queued server-side.
  auto held = l->events.size();
  REQUIRE(held >= 1);
  l->release();
  auto& timer = c.ez.getIoProvider().getTimer();
  auto last_loaded = [&] {
    for (auto& [e, missed] : l->events)
      if (e.model == "m11" && e.state == warm::model_state::loaded) return true;
    return false;
  };
  for (int i = 0; i < 500 && !last_loaded(); ++i)
    timer.afterDelay(20 * kj::MILLISECONDS).wait(c.ws());
  REQUIRE(last_loaded());
  INFO(held << " events in the held batch, " << l->events.size() << " delivered in all");
  // At most one queue's worth after the held batch, plus what the last load published after its
  // registration was answered (the release raced it); without the bound all ~36 would come.
  CHECK(l->events.size() <= held + 4 + 2);
  std::uint64_t missed_total = 0;
  for (std::size_t i = 1; i < l->events.size(); ++i) {
    auto& [e, missed] = l->events[i];
    // Every gap in the sequence is announced by the event after it, exactly.
    CHECK(e.sequence - l->events[i - 1].first.sequence - 1 == missed);
    missed_total += missed;
  }
  CHECK(missed_total > 0);
  CHECK(d.stop() == 0);
}

TEST_CASE(
    "a unix socket path: a live server's exits 1, a stale file is replaced, a non-socket exits 2") {
  warmd_process live;
  live.start();
  SECTION("in use by a running warmd") {
    warmd_process second;
    CHECK(second.run_to_exit({"--listen", live.address()}) == 1);
    CHECK(second.log().find("is in use by another server") != std::string::npos);
    // The running one is untouched: its socket still accepts.
    raw_socket still(live.socket());
    CHECK(still.open_now());
  }
  SECTION("a stale socket file nobody accepts on") {
    warmd_process d;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, d.socket().c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    ::close(fd);  // the file stays, nobody listens
    REQUIRE(fs::is_socket(d.socket()));
    d.log_level = "info";
    d.start();
    capnp::EzRpcClient c(d.address());
    auto req = c.getMain<r::Warm>().getModelStatusRequest();
    req.setId("x");
    CHECK(req.send().wait(c.getWaitScope()).getStatus().getCode() == Code::OK);
    CHECK(d.log().find("removed stale socket " + d.socket()) != std::string::npos);
    CHECK(d.stop() == 0);
  }
  SECTION("a regular file at the path") {
    warmd_process d;
    std::ofstream(d.socket()) << "not a socket";
    CHECK(d.run_to_exit({"--listen", d.address()}) == 2);
    CHECK(d.log().find("exists and is not a socket") != std::string::npos);
    CHECK(fs::is_regular_file(d.socket()));  // left alone
  }
  CHECK(live.stop() == 0);
}

TEST_CASE("a message over --max-request-bytes is answered tooLarge by the request-size check") {
  warmd_process d;
  d.write_model("m", {8, 4});
  // The tensor limit stays at its default (64 MiB), so only the request size can refuse.
  d.start({"--max-request-bytes", "1MiB"});
  capnp::EzRpcClient c(d.address());
  auto& ws = c.getWaitScope();
  auto warm = c.getMain<r::Warm>();
  const std::string limit = std::to_string(1 << 20);
  auto infer = [&](std::uint64_t width) {
    auto req = warm.inferRequest();
    auto request = req.initRequest();
    request.setTarget("m");
    auto t = request.initInputs(1)[0];
    t.setName("input");
    t.setDtype("F32");
    auto shape = t.initShape(2);
    shape.set(0, 1);
    shape.set(1, width);
    t.initData(static_cast<unsigned>(width * 4));
    return req.send().wait(ws);
  };
  {
    auto res = infer(512 << 10);  // a 2 MiB tensor
    CHECK(res.getStatus().getCode() == Code::TOO_LARGE);
    std::string message = res.getStatus().getMessage().cStr();
    CHECK(message.rfind("request is ", 0) == 0);
    CHECK(message.find("the limit is " + limit) != std::string::npos);
  }
  {
    auto req = warm.registerModelRequest();  // every method checks the size, not only infer
    req.setId(std::string(2 << 20, 'x'));
    req.getInfo().setPath("m");
    auto res = req.send().wait(ws);
    CHECK(res.getStatus().getCode() == Code::TOO_LARGE);
    CHECK(std::string(res.getStatus().getMessage().cStr()).find("the limit is " + limit) !=
          std::string::npos);
  }
  // The connection stays usable, and a request under the limit is served.
  auto req = warm.registerModelRequest();
  req.setId("m");
  req.getInfo().setPath("m");
  CHECK(req.send().wait(ws).getStatus().getCode() == Code::OK);
  // A connection reads messages up to 4 x the limit + 1 MiB (5 MiB here): just under that, the
  // answer is still tooLarge; just over, the message is not read and the connection is closed.
  CHECK(infer((4 << 20) / 4 + (256 << 10) / 4).getStatus().getCode() ==
        Code::TOO_LARGE);                                // 4.25 MiB
  CHECK_THROWS(infer((5 << 20) / 4 + (256 << 10) / 4));  // 5.25 MiB
  CHECK_THROWS(infer(8));                                // the same connection is gone
  capnp::EzRpcClient again(d.address());                 // warmd serves a new one
  auto status = again.getMain<r::Warm>().getModelStatusRequest();
  status.setId("m");
  CHECK(status.send().wait(again.getWaitScope()).getStatus().getCode() == Code::OK);
  CHECK(d.stop() == 0);
}

TEST_CASE("SIGTERM while inferences are in flight: they finish and warmd exits 0") {
  warmd_process d;
  d.device = "host:256MiB";
  d.log_level = "info";
  d.write_model("heavy", {1024, 2048, 2048, 1024});  // 24 MiB: a load and a slow batch
  d.start();
  unix_client c(d.address());
  {
    auto req = c.warm.registerModelRequest();
    req.setId("heavy");
    req.getInfo().setPath("heavy");
    REQUIRE(req.send().wait(c.ws()).getStatus().getCode() == Code::OK);
  }
  listener* l = nullptr;
  REQUIRE(c.watch(l) == Code::OK);
  // Two misses on the model: each waits for its load, then runs a batch of 512 rows (about
  // 5 G multiply-adds, seconds on a busy 2-core machine).
  warm::tensor batch;
  batch.name = "input";
  batch.shape = {512, 1024};
  batch.data.assign(512 * 1024 * 4, std::byte{0});
  std::vector<kj::Promise<capnp::Response<r::Warm::InferResults>>> calls;
  for (int i = 0; i < 2; ++i) {
    auto req = c.warm.inferRequest();
    r::to_capnp(warm::infer_request{"heavy", {batch}}, req.initRequest());
    calls.push_back(req.send());
  }
  // The load has started, so the first call is in flight in warmd: stop it now.
  auto& timer = c.ez.getIoProvider().getTimer();
  auto loading = [&] {
    for (auto& [e, missed] : l->events)
      if (e.model == "heavy" && e.state == warm::model_state::loading) return true;
    return false;
  };
  for (int i = 0; i < 1000 && !loading(); ++i)
    timer.afterDelay(10 * kj::MILLISECONDS).wait(c.ws());
  REQUIRE(loading());
  REQUIRE(::kill(d.pid(), SIGTERM) == 0);
  for (auto& call : calls) {
    auto res = [&] {
      try {
        return call.wait(c.ws());
      } catch (const kj::Exception& e) {  // the answer was lost: show why
        int status = d.stop();
        FAIL(e.getDescription().cStr() << "; warmd exited " << status << ", its log:\n" << d.log());
        throw;
      }
    }();
    CHECK(res.getStatus().getCode() == Code::OK);
    CHECK(res.getResult().getOutputs().size() == 1);
  }
  CHECK(d.stop() == 0);
  // At least the first call was in flight (the second may still have been on its way in).
  CHECK(d.log().find("call(s) in flight") != std::string::npos);
  CHECK(d.log().find("closing anyway") == std::string::npos);
}

TEST_CASE(
    "files warmd trusts: loose state directories, token files and repositories exit 2; symlinks "
    "warn") {
  warmd_process d;
  SECTION("a state directory every user may write") {
    fs::create_directories(d.dir() / "state");
    fs::permissions(d.dir() / "state", fs::perms::all);  // 0777, no sticky bit
    CHECK(d.run_to_exit({"--listen", d.address()}) == 2);
    CHECK(d.log().find("is writable by other users (mode 0777)") != std::string::npos);
  }
  SECTION("a state directory with the sticky bit, or writable by its group") {
    for (auto mode :
         {fs::perms::all | fs::perms::sticky_bit, fs::perms::owner_all | fs::perms::group_all}) {
      fs::create_directories(d.dir() / "state");
      fs::permissions(d.dir() / "state", mode);
      CHECK(d.run_to_exit({"--listen", d.address()}) == 2);
      CHECK(d.log().find("is writable by other users") != std::string::npos);
    }
  }
  SECTION("a token file others may read") {
    auto token_file = write_token(d.dir() / "token");
    fs::permissions(token_file,
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
    CHECK(d.run_to_exit({"--listen", d.address(), "--token-file", token_file}) == 2);
    CHECK(d.log().find("may be read or written by other users (mode 0604)") != std::string::npos);
  }
  SECTION("a repository every user may write") {
    fs::permissions(d.repo(), fs::perms::all);
    CHECK(d.run_to_exit({"--listen", d.address()}) == 2);
    CHECK(d.log().find("is writable by every user (mode 0777): anyone could publish a model") !=
          std::string::npos);
  }
  SECTION(
      "a symlinked state directory and a group-writable repository: warned, served; registry.db is "
      "0600") {
    fs::create_directories(d.dir() / "real-state");
    fs::create_directory_symlink(d.dir() / "real-state", d.dir() / "state");
    fs::permissions(d.repo(), fs::perms::owner_all | fs::perms::group_all);
    auto token_file = write_token(d.dir() / "token");
    d.start({"--listen", "127.0.0.1:0", "--allow-remote", "--token-file", token_file});
    auto log = d.log();
    CHECK(log.find("state directory " + (d.dir() / "state").string() + " is a symlink") !=
          std::string::npos);
    CHECK(log.find("is writable by its group") != std::string::npos);
    CHECK((fs::status(d.dir() / "real-state" / "registry.db").permissions() & fs::perms::mask) ==
          (fs::perms::owner_read | fs::perms::owner_write));
    CHECK(d.stop() == 0);
  }
}
