// GCC 12 warns that the std::variant inside warm::expected, carried through kj promises in a
// kj::Maybe, "may be used uninitialized": a false positive (the Maybe is engaged when read). The
// warning points into the standard headers, so this comes before them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "remote/remote_device.hpp"

#include <capnp/rpc-twoparty.h>
#include <fcntl.h>
#include <kj/async-io.h>
#include <kj/thread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <regex>
#include <thread>

#include "gpu/upload_pipeline.hpp"
#include "remote/tensors.hpp"
#include "runtime.capnp.h"
#include "warm/units.hpp"

namespace warm {
namespace {

using steady = std::chrono::steady_clock;

kj::Duration to_kj(std::chrono::milliseconds ms) { return ms.count() * kj::MILLISECONDS; }

std::string millis(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s" : std::to_string(ms.count()) + " ms";
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    auto sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

// Starts `command` under /bin/sh with one end of a socket pair as fd 3 (WARM_RUNTIME_FD=3) and
// the repositories it may read in WARM_RUNTIME_REPOS, and returns the other end. The child dies with warmd (PR_SET_PDEATHSIG), so a warmd killed with
// SIGKILL leaves no runtime behind.
expected<std::pair<int, pid_t>> spawn_runtime(const std::string& command, const std::vector<std::string>& repositories) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return make_error(errc::unavailable, std::string("socketpair: ") + std::strerror(errno));
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::string shell_line = "exec " + command;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "WARM_RUNTIME_FD=", 16) != 0 && std::strncmp(*e, "WARM_RUNTIME_REPOS=", 19) != 0)
      env_strings.emplace_back(*e);
  env_strings.emplace_back("WARM_RUNTIME_FD=3");
  std::string roots;
  for (const auto& r : repositories) roots += (roots.empty() ? "" : ":") + r;
  env_strings.emplace_back("WARM_RUNTIME_REPOS=" + roots);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
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

// A runtime's text (a version, a kind), cut to runtime_limits::text bytes.
std::string bounded_text(capnp::Text::Reader text) {
  return std::string(text.begin(), std::min<std::size_t>(text.size(), runtime_limits::text));
}

// A counting semaphore: the runtime's loadingThreads.
class load_slots {
 public:
  void set_limit(std::uint32_t limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = std::max<std::uint32_t>(1, limit);
    freed_.notify_all();
  }
  void acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    freed_.wait(lock, [&] { return taken_ < limit_; });
    ++taken_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    --taken_;
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  std::uint32_t limit_ = 1, taken_ = 0;
};

}  // namespace

// ---- the link: the runtime's connection, on its own kj thread ---------------------------------

class remote_device::link {
 public:
  struct loaded {
    std::uint64_t bytes = 0;
    model_io io;
    std::uint64_t generation = 0;
  };

  link(remote_device& dev, runtime_link_options options)
      : dev_(dev), options_(std::move(options)), thread_([this] { run(); }) {}

  ~link() {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      started_.wait(lock, [&] { return executor_ || exited_; });
      if (stop_) stop_->fulfill();
    }
    // kj::Thread's destructor joins.
  }

  // ---- any thread ----

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  int pid() const { return pid_.load(); }
  std::uint64_t restarts() const { return restarts_.load(); }

  std::string state() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string text = options_.socket.empty() ? "runtime pid " + std::to_string(pid_.load()) : "runtime " + options_.socket;
    if (!version_.empty()) text += ", " + version_;
    if (auto rss = rss_.load()) text += ", rss " + format_bytes(rss);
    if (auto beyond = unattributed_bytes_.load()) text += " (" + format_bytes(beyond) + " charged beyond its models)";
    text += ", restarts " + std::to_string(restarts_.load());
    if (!ready()) text += ", not ready" + (why_down_.empty() ? "" : ": " + why_down_);
    return text;
  }

  // Before the runtime's first status its kinds are unknown: every kind may be served (placement
  // then finds the device not ready and says so).
  bool serves(std::string_view kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return !kinds_known_ || std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end();
  }

  void watch(std::function<void(const device_event&)> listener) {
    std::lock_guard<std::mutex> lock(listener_mutex_);
    listener_ = std::move(listener);
  }

  bool wait_ready(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return became_ready_.wait_for(lock, timeout, [&] { return ready() || exited_; }) && ready();
  }

  load_slots& loads() { return loads_; }

  expected<std::uint64_t> predict(const std::string& id, const model_location& where) {
    return call<std::uint64_t>([&]() -> kj::Promise<expected<std::uint64_t>> {
      if (!connected()) return failed<std::uint64_t>(down_error());
      auto request = session_->cap.predictSizeRequest();
      request.setModelId(id);
      write_model_file(where, request.initFile());
      auto answer = request.send().then(
          [](capnp::Response<remote::ModelRuntime::PredictSizeResults>&& r) -> expected<std::uint64_t> {
            if (auto e = read_error(r.getError())) return *e;
            return r.getBytes();
          });
      return timed(answer.catch_([this](kj::Exception&& e) -> expected<std::uint64_t> { return lost(e); }),
                   options_.call_timeout,
                   [this]() -> expected<std::uint64_t> { return timeout_error("predictSize"); });
    });
  }

  expected<loaded> load(const std::string& id, const model_location& where, std::uint64_t reserved) {
    return call<loaded>([&]() -> kj::Promise<expected<loaded>> {
      if (!connected() || !ready()) return failed<loaded>(down_error());
      auto generation = session_->generation;
      auto request = session_->cap.loadRequest();
      request.setModelId(id);
      write_model_file(where, request.initFile());
      request.setReservedBytes(reserved);
      auto answer = request.send().then(
          [this, id, generation](capnp::Response<remote::ModelRuntime::LoadResults>&& r) -> expected<loaded> {
            if (auto e = read_error(r.getError())) return *e;
            if (r.getInputs().size() > runtime_limits::tensors || r.getOutputs().size() > runtime_limits::tensors) {
              send_unload(id, generation);
              return make_error(errc::load_failed, options_.name + ": the runtime loaded " + id + " with " +
                                                       std::to_string(r.getInputs().size()) + " inputs and " +
                                                       std::to_string(r.getOutputs().size()) + " outputs, more than " +
                                                       std::to_string(runtime_limits::tensors));
            }
            loaded l;
            l.bytes = r.getBytes();
            l.generation = generation;
            l.io.batched = r.getBatched();
            for (int side = 0; side < 2; ++side)
              for (auto spec : side == 0 ? r.getInputs() : r.getOutputs()) {
                auto read = read_spec(spec);
                if (!read) {  // loaded, but of no use: the runtime must not keep it
                  send_unload(id, generation);
                  return std::move(read).error();
                }
                (side == 0 ? l.io.inputs : l.io.outputs).push_back(std::move(*read));
              }
            return l;
          });
      return timed(answer.catch_([this](kj::Exception&& e) -> expected<loaded> { return lost(e); }),
                   options_.load_timeout, [this, id, generation]() -> expected<loaded> {
                     // The runtime may finish the load later: it must not keep what warm no
                     // longer counts.
                     send_unload(id, generation);
                     return make_error(errc::timeout, options_.name + ": loading " + id + " took longer than " +
                                                          millis(options_.load_timeout));
                   });
    });
  }

  // Sends an inference on the current connection (link thread only): the runtime's answer, the
  // connection's loss, or a timeout.
  kj::Promise<expected<std::vector<tensor>>> send_infer(const std::string& id, std::uint64_t generation,
                                                        const std::vector<tensor>& inputs, std::uint64_t batch) {
    if (!connected() || session_->generation != generation)
      return failed<std::vector<tensor>>(
          make_error(errc::unavailable, options_.name + ": " + id + " was lost with the runtime that held it"));
    auto request = session_->cap.inferRequest();
    request.setModelId(id);
    request.setBatch(batch);
    // In flight until the answer, the loss or the timeout: a crash's suspects (end_session).
    auto running = running_.insert(id);
    auto list = request.initInputs(static_cast<unsigned>(inputs.size()));
    for (unsigned i = 0; i < inputs.size(); ++i) write_tensor(inputs[i], list[i]);
    auto answer = request.send().then(
        [this, id](capnp::Response<remote::ModelRuntime::InferResults>&& r) -> expected<std::vector<tensor>> {
          if (auto e = read_error(r.getError())) return *e;
          auto outputs = read_tensors(r.getOutputs());
          if (!outputs)  // the runtime's fault, not the client's
            return make_error(errc::internal, "runtime " + options_.name + " answered model " + id +
                                                  " with a malformed output: " + outputs.error().message);
          return outputs;
        });
    return timed(answer.catch_([this](kj::Exception&& e) -> expected<std::vector<tensor>> { return lost(e); }),
                 options_.infer_timeout,
                 [this, id]() -> expected<std::vector<tensor>> {
                   return make_error(errc::timeout, options_.name + ": inference of " + id + " took longer than " +
                                                        millis(options_.infer_timeout));
                 })
        .attach(kj::defer([this, running] { running_.erase(running); }));
  }

  // Waits for the answer (batched passes: resident_model::run).
  expected<std::vector<tensor>> infer(const std::string& id, std::uint64_t generation,
                                      const std::vector<tensor>& inputs, std::uint64_t batch) {
    return call<std::vector<tensor>>([&] { return send_infer(id, generation, inputs, batch); });
  }

  // infer() without waiting: the request is sent from the link thread (this thread waits only for
  // that hand-over) and `done` is called from there with the answer, exactly once: also when the
  // connection or the link ends first.
  void infer_then(const std::string& id, std::uint64_t generation, const std::vector<tensor>& inputs,
                  std::uint64_t batch, resident_model::run_done done) {
    // Called once, whatever happens; a continuation dropped unrun (the link stopping) answers too.
    struct once {
      resident_model::run_done done;
      std::atomic<bool> called{false};
      void operator()(expected<std::vector<tensor>> r) {
        if (!called.exchange(true)) done(std::move(r));
      }
      ~once() {
        if (!called.exchange(true))
          done(make_error(errc::unavailable, "the runtime link stopped before the inference was answered"));
      }
    };
    auto answer = std::make_shared<once>();
    answer->done = std::move(done);
    auto sent = call<bool>([&]() -> kj::Promise<expected<bool>> {
      send_infer(id, generation, inputs, batch)
          .then([answer](expected<std::vector<tensor>> r) { (*answer)(std::move(r)); })
          .detach([answer](kj::Exception&& e) {
            (*answer)(make_error(errc::internal, "inference: " + std::string(e.getDescription().cStr())));
          });
      return expected<bool>(true);
    });
    if (!sent) (*answer)(std::move(sent).error());
  }

  // Tells the runtime to drop the model, when the connection it was loaded on is still up.
  void unload(const std::string& id, std::uint64_t generation) {
    if (std::this_thread::get_id() == link_thread_) {
      // The last reference of a model dropped on the link thread itself (an answer released the
      // last lease and nothing reclaims elsewhere): send it without waiting on this loop.
      send_unload(id, generation);
      return;
    }
    (void)call<bool>([&]() -> kj::Promise<expected<bool>> {
      if (!connected() || session_->generation != generation) return expected<bool>(true);
      auto request = session_->cap.unloadRequest();
      request.setModelId(id);
      auto answer = request.send().then([](auto&&) -> expected<bool> { return true; });
      return timed(answer.catch_([](kj::Exception&&) -> expected<bool> { return true; }), options_.call_timeout,
                   [] { return expected<bool>(true); });
    });
  }

 private:
  struct session {
    std::uint64_t generation = 0;
    pid_t pid = 0;
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> client;
    remote::ModelRuntime::Client cap = nullptr;
    steady::time_point up_since = steady::now();
  };

  // Runs `f` on the link thread and waits for the promise it returns. unavailable when the link
  // has stopped.
  template <typename T, typename F>
  expected<T> call(F&& f) {
    const kj::Executor* executor;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      started_.wait(lock, [&] { return executor_ || exited_; });
      if (!executor_ || exited_) return make_error(errc::unavailable, options_.name + ": the runtime link has stopped");
      executor = executor_.get();
    }
    try {
      return executor->executeSync(std::forward<F>(f));
    } catch (const kj::Exception& e) {
      return make_error(errc::unavailable, options_.name + ": " + std::string(e.getDescription().cStr()));
    }
  }

  template <typename T>
  static kj::Promise<expected<T>> failed(warm::error e) {
    return kj::Promise<expected<T>>(expected<T>(std::move(e)));
  }

  template <typename T, typename Fallback>
  kj::Promise<T> timed(kj::Promise<T> answer, std::chrono::milliseconds limit, Fallback fallback) {
    return answer.exclusiveJoin(io_->provider->getTimer().afterDelay(to_kj(limit)).then(std::move(fallback)));
  }

  warm::error down_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return make_error(errc::unavailable,
                      options_.name + ": the runtime is not ready" + (why_down_.empty() ? "" : " (" + why_down_ + ")"));
  }
  warm::error lost(const kj::Exception& e) const {
    return make_error(errc::unavailable, options_.name + ": the connection to the runtime was lost during the call (" +
                                             std::string(e.getDescription().cStr()) + ")");
  }
  warm::error timeout_error(const char* what) const {
    return make_error(errc::timeout, options_.name + ": " + what + " not answered within " + millis(options_.call_timeout));
  }

  bool connected() const { return session_.get() != nullptr; }

  void send_unload(const std::string& id, std::uint64_t generation) {
    if (!connected() || session_->generation != generation) return;
    auto request = session_->cap.unloadRequest();
    request.setModelId(id);
    request.send().ignoreResult().detach([](kj::Exception&&) {});
  }

  void tell(const device_event& e) {
    std::lock_guard<std::mutex> lock(listener_mutex_);
    if (listener_) listener_(e);
  }

  // ---- the link thread ----

  void run() {
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

  // Connects, serves the session until it ends, waits the back-off, and again, until stopped.
  kj::Promise<void> supervise() {
    return session_life()
        .catch_([](kj::Exception&& e) { return std::string(e.getDescription().cStr()); })
        .then([this](std::string why) {
          auto delay = end_session(why, true);
          return io_->provider->getTimer().afterDelay(to_kj(delay));
        })
        .then([this] { return supervise(); });
  }

  kj::Promise<kj::Own<kj::AsyncIoStream>> open_stream() {
    if (!options_.socket.empty())
      return io_->provider->getNetwork().parseAddress(kj::str("unix:", options_.socket.c_str())).then(
          [](kj::Own<kj::NetworkAddress> address) { return address->connect(); });
    auto spawned = spawn_runtime(options_.command, options_.repositories);
    if (!spawned) KJ_FAIL_REQUIRE("cannot start the runtime", spawned.error().message.c_str());
    pending_pid_ = spawned->second;
    pid_ = pending_pid_;
    return io_->lowLevelProvider->wrapSocketFd(spawned->first, kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP);
  }

  // One connection's life: resolves (or fails) with why it ended.
  kj::Promise<std::string> session_life() {
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
          auto closed = session_->client->onDisconnect().then([] { return std::string("the connection closed"); });
          return closed.exclusiveJoin(poll_status());
        });
  }

  // Asks the status; a status not answered within `limit` ends the session (a hung runtime).
  kj::Promise<void> ask_status(std::chrono::milliseconds limit, bool first) {
    auto answer = session_->cap.statusRequest().send().then(
        [this, first](capnp::Response<remote::ModelRuntime::StatusResults>&& r) -> kj::Promise<void> {
          return adopt(r.getStatus(), first);
        });
    return answer.exclusiveJoin(io_->provider->getTimer().afterDelay(to_kj(limit)).then([limit]() -> kj::Promise<void> {
      KJ_FAIL_REQUIRE("status not answered in time: the runtime hangs", millis(limit).c_str());
    }));
  }

  kj::Promise<std::string> poll_status() {
    return io_->provider->getTimer()
        .afterDelay(to_kj(options_.status_period))
        .then([this] { return ask_status(options_.call_timeout, false); })
        .then([this] { return poll_status(); });
  }

  // Takes in a status: kinds, version, load slots, capacity, the memory held beyond the models
  // and readiness, each bounded (runtime_limits). On a session's first status, unloads what the
  // runtime holds that this session did not place (a runtime that outlived an earlier warmd).
  kj::Promise<void> adopt(remote::RuntimeStatus::Reader status, bool first) {
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
        if (options_.log && restarts_.load() > 0) options_.log(options_.name + ": the runtime is ready again");
        tell({device_event::kind::ready, {}, {}, {}});
      }
    });
  }

  // Unloads the ids a session's first status lists, runtime_limits::unloads_at_once at a time
  // (each answer, or throw, lets the next go). A list past runtime_limits::loaded_ids is refused
  // (logged): nothing is unloaded, and what the runtime holds is its own affair.
  kj::Promise<void> unload_orphans(capnp::List<capnp::Text>::Reader listed) {
    if (listed.size() == 0) return kj::READY_NOW;
    if (listed.size() > runtime_limits::loaded_ids) {
      if (options_.log)
        options_.log(options_.name + ": the runtime lists " + std::to_string(listed.size()) +
                     " models loaded, more than " + std::to_string(runtime_limits::loaded_ids) + ": none is unloaded");
      return kj::READY_NOW;
    }
    auto ids = std::make_shared<std::vector<std::string>>();
    ids->reserve(listed.size());
    for (auto id : listed) ids->emplace_back(id.cStr());
    auto next = std::make_shared<std::size_t>(0);
    kj::Vector<kj::Promise<void>> lanes;
    for (std::size_t i = 0; i < std::min(ids->size(), runtime_limits::unloads_at_once); ++i)
      lanes.add(unload_next(ids, next));
    return kj::joinPromises(lanes.releaseAsArray());
  }

  // One lane of unload_orphans: unloads ids[next++] and goes on until none is left (or the
  // connection is gone).
  kj::Promise<void> unload_next(std::shared_ptr<const std::vector<std::string>> ids,
                                std::shared_ptr<std::size_t> next) {
    if (*next >= ids->size() || !connected()) return kj::READY_NOW;
    auto request = session_->cap.unloadRequest();
    request.setModelId((*ids)[(*next)++]);
    return request.send()
        .then([](auto&&) {}, [](kj::Exception&&) {})
        .then([this, ids = std::move(ids), next = std::move(next)]() mutable { return unload_next(ids, next); });
  }

  // Charges the device what the runtime's process holds beyond its memory at start, its models'
  // charges and options_.rss_slack (0 when it does not measure: rss == 0), and stops charging
  // what it no longer holds. Returns whether the charge changed.
  bool charge_beyond_models(std::uint64_t rss, std::uint64_t base) {
    rss = std::min(rss, runtime_limits::bytes);
    base = std::min(base, rss);
    rss_.store(rss);
    auto before = unattributed_.bytes();
    auto used = dev_.used();
    auto charged = used > before ? used - before : 0;  // the models (and loads under way)
    auto held = rss - base;
    std::uint64_t beyond = 0;
    if (held > charged && held - charged > options_.rss_slack) beyond = held - charged - options_.rss_slack;
    if (beyond == before) return false;
    if (beyond > before)
      unattributed_.absorb(dev_.overcharge(beyond - before));
    else
      unattributed_.shrink_to(beyond);
    unattributed_bytes_.store(beyond);
    if (options_.log && before == 0)
      options_.log(options_.name + ": the runtime's process holds " + format_bytes(rss) + ", " + format_bytes(beyond) +
                   " more than its models are charged (past its memory at start and the slack): charged to the device");
    else if (options_.log && beyond == 0)
      options_.log(options_.name + ": the runtime's process holds " + format_bytes(rss) +
                   ", within its models' charges again: nothing charged beyond them");
    return true;
  }

  // Ends the current session (if any): drops the connection, reaps the process, and reports the
  // models lost. Returns the back-off before the next attempt.
  std::chrono::milliseconds end_session(const std::string& why, bool restart) {
    auto pid = connected() ? session_->pid : std::exchange(pending_pid_, 0);
    std::vector<std::string> in_flight(running_.begin(), running_.end());  // before the calls fail
    bool long_up = connected() && steady::now() - session_->up_since >= std::chrono::minutes(1);
    bool had_session = connected();
    ready_.store(false, std::memory_order_release);
    session_ = nullptr;  // calls in flight fail
    unattributed_.reset();  // the process's memory is gone (or no longer known)
    unattributed_bytes_ = 0;
    rss_ = 0;
    std::string reason = options_.name + ": ";
    if (pid > 0) {
      int status = 0;
      // A runtime that closed its end is usually exiting: give it a moment to say how.
      pid_t done = 0;
      for (int i = 0; i < 20 && (done = waitpid(pid, &status, WNOHANG)) == 0; ++i) usleep(10'000);
      if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      reason += "the runtime (pid " + std::to_string(pid) + ") " + exit_text(status) + " after: " + why;
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

  remote_device& dev_;
  const runtime_link_options options_;

  mutable std::mutex mutex_;  // guards what follows, up to the link thread's own state
  std::condition_variable started_, became_ready_;
  kj::Own<const kj::Executor> executor_;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
  bool exited_ = false;
  std::vector<std::string> kinds_;
  bool kinds_known_ = false;
  std::string version_;
  std::string why_down_ = "starting";

  std::mutex listener_mutex_;
  std::function<void(const device_event&)> listener_;

  std::atomic<bool> ready_{false};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pid_{0};
  std::atomic<std::uint64_t> restarts_{0};
  std::atomic<std::uint64_t> rss_{0};                 // the last status's rssBytes (bounded)
  std::atomic<std::uint64_t> unattributed_bytes_{0};  // unattributed_.bytes(), for state()
  load_slots loads_;

  // The link thread's own.
  std::atomic<std::thread::id> link_thread_{};
  kj::AsyncIoContext* io_ = nullptr;
  kj::Own<session> session_;
  pid_t pending_pid_ = 0;
  std::chrono::milliseconds backoff_ = options_.restart_min;
  std::multiset<std::string> running_;  // link thread only: the inferences sent and not yet answered
  memory_reservation unattributed_;      // link thread only: the process's memory beyond its models

  kj::Thread thread_;  // last: starts once everything above is constructed
};

// ---- a model in the runtime -------------------------------------------------------------------

class remote_resident final : public resident_model {
 public:
  remote_resident(remote_device& dev, std::string id, model_io io, memory_reservation charge,
                  std::uint64_t generation, std::uint64_t measured)
      : resident_model(dev, std::move(io)),
        dev_(dev),
        id_(std::move(id)),
        charge_(std::move(charge)),
        generation_(generation) {
    set_measured_bytes(measured);
  }
  // Unloads it in the runtime (when the connection it was loaded on is still up); its bytes go
  // back to the device's budget with charge_.
  ~remote_resident() override { dev_.link_->unload(id_, generation_); }

  const std::string& id() const { return id_; }
  std::string host_id() const override { return id_; }
  std::uint64_t generation() const { return generation_; }
  std::uint64_t bytes() const override { return charge_.bytes(); }
  // Every inference is a round trip to another process: never run on a caller's thread that
  // serves other clients (warmd's RPC loop), always on the inference threads.
  std::uint64_t cost(std::uint64_t) const override { return UINT64_MAX; }
  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs, std::uint64_t batch) const override {
    return checked(dev_.link_->infer(id_, generation_, inputs, batch), batch);
  }
  // The request is handed to the link and answered from there: no thread of warm's waits for it.
  // The model outlives the answer: its caller holds it until `done` is called.
  void run_then(const std::vector<tensor>& inputs, std::uint64_t batch, run_done done) const override {
    dev_.link_->infer_then(id_, generation_, inputs, batch,
                           [this, batch, done = std::move(done)](expected<std::vector<tensor>> answer) {
                             done(checked(std::move(answer), batch));
                           });
  }
  void settle(memory_reservation more) override {
    charge_.absorb(std::move(more));
    if (measured_bytes()) charge_.shrink_to(measured_bytes());
  }

 private:
  // The runtime's answer when its outputs are those the load declared (check_outputs), else
  // internal naming the runtime, the model and the output: nothing else reaches a client.
  expected<std::vector<tensor>> checked(expected<std::vector<tensor>> answer, std::uint64_t batch) const {
    if (!answer) return answer;
    auto fits = check_outputs(*answer, io(), batch);
    if (!fits)
      return make_error(errc::internal,
                        "runtime " + dev_.name() + " answered model " + id_ + " with " + fits.error().message);
    return answer;
  }

  remote_device& dev_;
  std::string id_;
  memory_reservation charge_;
  std::uint64_t generation_;
};

// ---- the device -------------------------------------------------------------------------------

expected<runtime_link_options> parse_runtime_spec(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos)
    return make_error(errc::invalid_argument, "runtime '" + text + "': expected NAME=COMMAND or NAME=unix:PATH");
  runtime_link_options o;
  o.name = text.substr(0, eq);
  auto rest = text.substr(eq + 1);
  static const std::regex name_rule("[A-Za-z0-9_.-]{1,64}");
  if (!std::regex_match(o.name, name_rule))
    return make_error(errc::invalid_argument,
                      "runtime '" + text + "': the name must be 1..64 letters, digits, '_', '.' or '-'");
  if (o.name == "host" || o.name == "cuda" || o.name.rfind("host.", 0) == 0 || o.name.rfind("cuda:", 0) == 0)
    return make_error(errc::invalid_argument, "runtime '" + text + "': '" + o.name + "' names a built-in device");
  if (rest.rfind("unix:", 0) == 0) {
    o.socket = rest.substr(5);
    if (o.socket.empty()) return make_error(errc::invalid_argument, "runtime '" + text + "': empty socket path");
  } else {
    o.command = rest;
    if (rest.find_first_not_of(" \t") == std::string::npos)
      return make_error(errc::invalid_argument, "runtime '" + text + "': empty command");
  }
  return o;
}

remote_device::remote_device(runtime_link_options options) : device(options.name, 0) {
  link_ = std::make_unique<link>(*this, std::move(options));
}

std::shared_ptr<remote_device> remote_device::start(runtime_link_options options) {
  auto wait = options.start_timeout;
  std::shared_ptr<remote_device> dev(new remote_device(std::move(options)));
  dev->link_->wait_ready(wait);
  return dev;
}

remote_device::~remote_device() { link_.reset(); }

bool remote_device::ready() const { return link_->ready(); }
std::string remote_device::state() const { return link_->state(); }
void remote_device::watch(std::function<void(const device_event&)> listener) { link_->watch(std::move(listener)); }
bool remote_device::serves(std::string_view kind) const { return link_->serves(kind); }
bool remote_device::holds(const resident_model& model) const {
  auto* remote = dynamic_cast<const remote_resident*>(&model);
  return remote && &remote->owner() == this && remote->generation() == link_->generation() && link_->ready();
}

int remote_device::pid() const { return link_->pid(); }
std::uint64_t remote_device::restarts() const { return link_->restarts(); }

expected<std::unique_ptr<resident_model>> remote_device::load_model(const model_location& where,
                                                                    memory_reservation reservation,
                                                                    load_stats* stats) {
  auto started = steady::now();
  // The runtime knows models by warmd's name for each load: the model's path in its repository
  // and a number, unique for this warmd.
  static std::atomic<std::uint64_t> loads{0};
  auto relative = where.root.empty() || where.path.rfind(where.root, 0) != 0 ? where.path
                                                                             : where.path.substr(where.root.size() + 1);
  auto id = relative + "#" + std::to_string(++loads);
  auto predicted = link_->predict(id, where);
  if (predicted && *predicted > capacity())
    return make_error(errc::model_too_large, name() + ": the runtime predicts " + format_bytes(*predicted) + " for " +
                                                 relative + ", more than its capacity of " + format_bytes(capacity()));
  link_->loads().acquire();
  auto loaded = link_->load(id, where, reservation.bytes());
  link_->loads().release();
  if (!loaded) {
    auto e = std::move(loaded).error();
    if (e.code == errc::invalid_argument || e.code == errc::not_found || e.code == errc::internal)
      e.code = errc::load_failed;
    return e;
  }
  if (loaded->bytes > capacity()) {  // also a number no runtime could hold (2^64): never used
    link_->unload(id, loaded->generation);
    return make_error(errc::model_too_large, name() + ": the runtime measured " + format_bytes(loaded->bytes) +
                                                 " for " + relative + ", more than its capacity of " +
                                                 format_bytes(capacity()));
  }
  if (loaded->io.inputs.empty() || loaded->io.outputs.empty()) {
    link_->unload(id, loaded->generation);
    return make_error(errc::load_failed, name() + ": the runtime loaded " + relative +
                                             " but described no inputs or outputs (the interface requires them)");
  }
  if (stats) {
    stats->bytes = loaded->bytes;
    stats->seconds = std::chrono::duration<double>(steady::now() - started).count();
  }
  return std::unique_ptr<resident_model>(std::make_unique<remote_resident>(
      *this, id, std::move(loaded->io), std::move(reservation), loaded->generation, loaded->bytes));
}

expected<std::unique_ptr<device_buffer>> remote_device::allocate_memory(std::uint64_t) {
  return make_error(errc::invalid_argument, name() + ": a model runtime's memory is its own; warm allocates none");
}

std::unique_ptr<upload_target> remote_device::upload_target_for(device_buffer&) { return nullptr; }

expected<void> remote_device::run(const dense_resident&, const float*, std::uint64_t, float*) {
  return make_error(errc::invalid_argument, name() + ": models here run in the runtime");
}

}  // namespace warm
