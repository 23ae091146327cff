// GCC 12 warns that the std::variant inside warm::expected, carried through kj promises in a
// kj::Maybe, "may be used uninitialized": a false positive (the Maybe is engaged when read). The
// warning points into the standard headers, so this comes before them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "remote/remote_link.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace warm {
using namespace remote_link_detail;

namespace {

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    auto sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

// Starts `command` under /bin/sh with one end of a socket pair as fd 3 (WARM_RUNTIME_FD=3) and
// the repositories it may read in WARM_RUNTIME_REPOS, and returns the other end. The child dies
// with warmd (PR_SET_PDEATHSIG), so a warmd killed with SIGKILL leaves no runtime behind.
expected<std::pair<int, pid_t>> spawn_runtime(const std::string& command,
                                              const std::vector<std::string>& repositories) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return make_error(errc::unavailable, std::string("socketpair: ") + std::strerror(errno));
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::string shell_line = "exec " + command;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "WARM_RUNTIME_FD=", 16) != 0 &&
        std::strncmp(*e, "WARM_RUNTIME_REPOS=", 19) != 0)
      env_strings.emplace_back(*e);
  env_strings.emplace_back("WARM_RUNTIME_FD=3");
  std::string roots;
  for (const auto& r : repositories)
    roots += (roots.empty() ? "" : ":") + r;
  env_strings.emplace_back("WARM_RUNTIME_REPOS=" + roots);
  std::vector<char*> envp;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {"/bin/sh", "-c", shell_line.c_str(), nullptr};
  auto parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    auto why = std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return make_error(errc::unavailable, std::string("fork: ") + why);
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // warmd is already gone
    // A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group) reaches
    // warmd alone, which stops its runtimes itself instead of seeing them killed under it.
    setpgid(0, 0);
    int child_end = fds[1];
    if (child_end == 3) child_end = fcntl(3, F_DUPFD_CLOEXEC, 4);
    if (child_end < 0 || dup2(child_end, 3) < 0) _exit(126);  // dup2 clears close-on-exec
    // The signal mask and dispositions warmd set (its RPC thread blocks SIGCHLD, SIGINT...) are
    // not the runtime's.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  close(fds[1]);
  return std::pair<int, pid_t>{fds[0], pid};
}

}  // namespace

void remote_device::link::run() {
  try {
    auto io = kj::setupAsyncIo();
    io_ = &io;
    link_thread_ = std::this_thread::get_id();
    auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      executor_ = kj::getCurrentThreadExecutor().addRef();
      stop_ = kj::mv(stop.fulfiller);
    }
    started_.notify_all();
    supervise().exclusiveJoin(kj::mv(stop.promise)).wait(io.waitScope);
    end_session("warmd stopped", false);
    io_ = nullptr;
  } catch (const kj::Exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    why_down_ = e.getDescription().cStr();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exited_ = true;
    ready_ = false;
  }
  started_.notify_all();
  became_ready_.notify_all();
}

kj::Promise<void> remote_device::link::supervise() {
  return session_life()
      .catch_([](kj::Exception&& e) { return std::string(e.getDescription().cStr()); })
      .then([this](std::string why) {
        auto delay = end_session(why, true);
        return io_->provider->getTimer().afterDelay(to_kj(delay));
      })
      .then([this] { return supervise(); });
}

kj::Promise<kj::Own<kj::AsyncIoStream>> remote_device::link::open_stream() {
  if (!options_.socket.empty())
    return io_->provider->getNetwork()
        .parseAddress(kj::str("unix:", options_.socket.c_str()))
        .then([](kj::Own<kj::NetworkAddress> address) { return address->connect(); });
  auto spawned = spawn_runtime(options_.command, options_.repositories);
  if (!spawned) KJ_FAIL_REQUIRE("cannot start the runtime", spawned.error().message.c_str());
  pending_pid_ = spawned->second;
  pid_ = pending_pid_;
  return io_->lowLevelProvider->wrapSocketFd(spawned->first,
                                             kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
}

kj::Promise<std::string> remote_device::link::session_life() {
  return open_stream()
      .then([this](kj::Own<kj::AsyncIoStream> stream) {
        auto s = kj::heap<session>();
        s->pid = std::exchange(pending_pid_, 0);
        s->stream = kj::mv(stream);
        s->client = kj::heap<capnp::TwoPartyClient>(*s->stream);
        s->cap = s->client->bootstrap().castAs<remote::ModelRuntime>();
        s->generation = generation_.load() + 1;
        generation_.store(s->generation, std::memory_order_release);
        session_ = kj::mv(s);
        return ask_status(options_.start_timeout, true);
      })
      .then([this]() -> kj::Promise<std::string> {
        auto closed = session_->client->onDisconnect().then(
            [] { return std::string("the connection closed"); });
        return closed.exclusiveJoin(poll_status());
      });
}

kj::Promise<void> remote_device::link::ask_status(std::chrono::milliseconds limit, bool first) {
  auto answer = session_->cap.statusRequest().send().then(
      [this, first](capnp::Response<remote::ModelRuntime::StatusResults>&& r) -> kj::Promise<void> {
        return adopt(r.getStatus(), first);
      });
  return answer.exclusiveJoin(
      io_->provider->getTimer().afterDelay(to_kj(limit)).then([limit]() -> kj::Promise<void> {
        KJ_FAIL_REQUIRE("status not answered in time: the runtime hangs", millis(limit).c_str());
      }));
}

kj::Promise<std::string> remote_device::link::poll_status() {
  return io_->provider->getTimer()
      .afterDelay(to_kj(options_.status_period))
      .then([this] { return ask_status(options_.call_timeout, false); })
      .then([this] { return poll_status(); });
}

kj::Promise<void> remote_device::link::adopt(remote::RuntimeStatus::Reader status, bool first) {
  bool was_ready = ready();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kinds_.clear();
    for (auto k : status.getKinds()) {
      if (kinds_.size() == runtime_limits::kinds) break;
      kinds_.push_back(bounded_text(k));
    }
    kinds_known_ = true;
    version_ = bounded_text(status.getVersion());
    why_down_ = status.getReady() ? "" : "it reports not ready";
  }
  loads_.set_limit(std::min(status.getLoadingThreads(), runtime_limits::loading_threads));
  auto capacity = std::min(status.getCapacityBytes(), runtime_limits::bytes);
  bool resized = capacity != dev_.capacity();
  if (resized) dev_.set_capacity(capacity);
  // A new charge beyond the models asks the device's actor to fit them again, as a new capacity.
  resized = charge_beyond_models(status.getRssBytes(), status.getBaseRssBytes()) || resized;
  auto unloads = first ? unload_orphans(status.getLoaded()) : kj::Promise<void>(kj::READY_NOW);
  bool now_ready = status.getReady();
  return unloads.then([this, resized, was_ready, now_ready] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.store(now_ready, std::memory_order_release);
    }
    became_ready_.notify_all();
    if (resized) tell({device_event::kind::capacity_changed, {}, {}, {}});
    if (now_ready && !was_ready) {
      if (options_.log && restarts_.load() > 0)
        options_.log(options_.name + ": the runtime is ready again");
      tell({device_event::kind::ready, {}, {}, {}});
    }
  });
}

kj::Promise<void> remote_device::link::unload_orphans(capnp::List<capnp::Text>::Reader listed) {
  if (listed.size() == 0) return kj::READY_NOW;
  if (listed.size() > runtime_limits::loaded_ids) {
    if (options_.log)
      options_.log(options_.name + ": the runtime lists " + std::to_string(listed.size()) +
                   " models loaded, more than " + std::to_string(runtime_limits::loaded_ids) +
                   ": none is unloaded");
    return kj::READY_NOW;
  }
  auto ids = std::make_shared<std::vector<std::string>>();
  ids->reserve(listed.size());
  for (auto id : listed)
    ids->emplace_back(id.cStr());
  auto next = std::make_shared<std::size_t>(0);
  kj::Vector<kj::Promise<void>> lanes;
  for (std::size_t i = 0; i < std::min(ids->size(), runtime_limits::unloads_at_once); ++i)
    lanes.add(unload_next(ids, next));
  return kj::joinPromises(lanes.releaseAsArray());
}

kj::Promise<void> remote_device::link::unload_next(
    std::shared_ptr<const std::vector<std::string>> ids, std::shared_ptr<std::size_t> next) {
  if (*next >= ids->size() || !connected()) return kj::READY_NOW;
  auto request = session_->cap.unloadRequest();
  request.setModelId((*ids)[(*next)++]);
  return request.send()
      .then([](auto&&) {}, [](kj::Exception&&) {})
      .then([this, ids = std::move(ids), next = std::move(next)]() mutable {
        return unload_next(ids, next);
      });
}

bool remote_device::link::charge_beyond_models(std::uint64_t rss, std::uint64_t base) {
  rss = std::min(rss, runtime_limits::bytes);
  base = std::min(base, rss);
  rss_.store(rss);
  auto before = unattributed_.bytes();
  auto used = dev_.used();
  auto charged = used > before ? used - before : 0;  // the models (and loads under way)
  auto held = rss - base;
  std::uint64_t beyond = 0;
  if (held > charged && held - charged > options_.rss_slack)
    beyond = held - charged - options_.rss_slack;
  if (beyond == before) return false;
  if (beyond > before)
    unattributed_.absorb(dev_.overcharge(beyond - before));
  else
    unattributed_.shrink_to(beyond);
  unattributed_bytes_.store(beyond);
  if (options_.log && before == 0)
    options_.log(options_.name + ": the runtime's process holds " + format_bytes(rss) + ", " +
                 format_bytes(beyond) +
                 " more than its models are charged (past its memory at start and the slack): "
                 "charged to the device");
  else if (options_.log && beyond == 0)
    options_.log(options_.name + ": the runtime's process holds " + format_bytes(rss) +
                 ", within its models' charges again: nothing charged beyond them");
  return true;
}

std::chrono::milliseconds remote_device::link::end_session(const std::string& why, bool restart) {
  auto pid = connected() ? session_->pid : std::exchange(pending_pid_, 0);
  std::vector<std::string> in_flight(running_.begin(), running_.end());  // before the calls fail
  bool long_up = connected() && steady::now() - session_->up_since >= std::chrono::minutes(1);
  bool had_session = connected();
  ready_.store(false, std::memory_order_release);
  session_ = nullptr;     // calls in flight fail
  unattributed_.reset();  // the process's memory is gone (or no longer known)
  unattributed_bytes_ = 0;
  rss_ = 0;
  std::string reason = options_.name + ": ";
  if (pid > 0) {
    int status = 0;
    // A runtime that closed its end is usually exiting: give it a moment to say how.
    pid_t done = 0;
    for (int i = 0; i < 20 && (done = waitpid(pid, &status, WNOHANG)) == 0; ++i)
      usleep(10'000);
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    reason +=
        "the runtime (pid " + std::to_string(pid) + ") " + exit_text(status) + " after: " + why;
    pid_ = 0;
  } else {
    reason += "lost the runtime: " + why;
  }
  if (long_up) backoff_ = options_.restart_min;
  auto delay = backoff_;
  backoff_ = std::min(options_.restart_max, backoff_ * 2);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    why_down_ = restart ? reason + "; restarting in " + millis(delay) : reason;
  }
  if (restart && options_.log) options_.log(reason + "; restarting in " + millis(delay));
  if (restart && (had_session || pid > 0)) {
    ++restarts_;
    tell({device_event::kind::models_lost, make_error(errc::unavailable, reason),
          std::chrono::duration_cast<std::chrono::nanoseconds>(delay), std::move(in_flight)});
  }
  return delay;
}

}  // namespace warm
