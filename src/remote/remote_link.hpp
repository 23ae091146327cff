// remote_device's link: the connection to a model runtime, served on a kj thread of its own
// (remote_link.cpp: the link thread's work: starting or dialling the runtime, its sessions, status
// polls and restarts). Private to src/remote: included by remote_device.cpp and remote_link.cpp.
#pragma once

#include "remote/remote_device.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/thread.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu/upload_pipeline.hpp"
#include "remote/tensors.hpp"
#include "runtime.capnp.h"
#include "warm/model_repository.hpp"
#include "warm/units.hpp"

namespace warm {
namespace remote_link_detail {

using steady = std::chrono::steady_clock;

inline kj::Duration to_kj(std::chrono::milliseconds ms) {
  return ms.count() * kj::MILLISECONDS;
}

inline std::string millis(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s"
                                : std::to_string(ms.count()) + " ms";
}

// A runtime's text (a version, a kind), cut to runtime_limits::text bytes.
inline std::string bounded_text(capnp::Text::Reader text) {
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

}  // namespace remote_link_detail

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
    std::string text = options_.socket.empty() ? "runtime pid " + std::to_string(pid_.load())
                                               : "runtime " + options_.socket;
    if (!version_.empty()) text += ", " + version_;
    if (auto rss = rss_.load()) text += ", rss " + format_bytes(rss);
    if (auto beyond = unattributed_bytes_.load())
      text += " (" + format_bytes(beyond) + " charged beyond its models)";
    text += ", restarts " + std::to_string(restarts_.load());
    if (!ready()) text += ", not ready" + (why_down_.empty() ? "" : ": " + why_down_);
    return text;
  }

  // Before the runtime's first status its kinds are unknown: every kind may be served (placement
  // then finds the device not ready and says so).
  // A runtime that lists the kind "*" serves every kind warm's own backends do not (a
  // ModelMesh runtime behind warm-mmesh: it serves the types of warm.json manifests).
  bool serves(std::string_view kind) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!kinds_known_ || std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end()) return true;
    if (std::find(kinds_.begin(), kinds_.end(), "*") == kinds_.end()) return false;
    for (const auto& built_in : model_file_kinds)
      if (kind == built_in.kind) return false;
    return kind != manifest_kind;
  }

  void watch(std::function<void(const device_event&)> listener) {
    std::lock_guard<std::mutex> lock(listener_mutex_);
    listener_ = std::move(listener);
  }

  bool wait_ready(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return became_ready_.wait_for(lock, timeout, [&] { return ready() || exited_; }) && ready();
  }

  remote_link_detail::load_slots& loads() { return loads_; }

  expected<std::uint64_t> predict(const std::string& id, const model_location& where) {
    return call<std::uint64_t>([&]() -> kj::Promise<expected<std::uint64_t>> {
      if (!connected()) return failed<std::uint64_t>(down_error());
      auto request = session_->cap.predictSizeRequest();
      request.setModelId(id);
      write_model_file(where, request.initFile());
      auto answer =
          request.send().then([](capnp::Response<remote::ModelRuntime::PredictSizeResults>&& r)
                                  -> expected<std::uint64_t> {
            if (auto e = read_error(r.getError())) return *e;
            return r.getBytes();
          });
      return timed(
          answer.catch_([this](kj::Exception&& e) -> expected<std::uint64_t> { return lost(e); }),
          options_.call_timeout,
          [this]() -> expected<std::uint64_t> { return timeout_error("predictSize"); });
    });
  }

  expected<loaded> load(const std::string& id, const model_location& where,
                        std::uint64_t reserved) {
    return call<loaded>([&]() -> kj::Promise<expected<loaded>> {
      if (!connected() || !ready()) return failed<loaded>(down_error());
      auto generation = session_->generation;
      auto request = session_->cap.loadRequest();
      request.setModelId(id);
      write_model_file(where, request.initFile());
      request.setReservedBytes(reserved);
      auto answer = request.send().then(
          [this, id,
           generation](capnp::Response<remote::ModelRuntime::LoadResults>&& r) -> expected<loaded> {
            if (auto e = read_error(r.getError())) return *e;
            if (r.getInputs().size() > runtime_limits::tensors ||
                r.getOutputs().size() > runtime_limits::tensors) {
              send_unload(id, generation);
              return make_error(errc::load_failed,
                                options_.name + ": the runtime loaded " + id + " with " +
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
                     return make_error(errc::timeout,
                                       options_.name + ": loading " + id + " took longer than " +
                                           remote_link_detail::millis(options_.load_timeout));
                   });
    });
  }

  // Sends an inference on the current connection (link thread only): the runtime's answer, the
  // connection's loss, or a timeout.
  kj::Promise<expected<std::vector<tensor>>> send_infer(const std::string& id,
                                                        std::uint64_t generation,
                                                        const std::vector<tensor>& inputs,
                                                        std::uint64_t batch) {
    if (!connected() || session_->generation != generation)
      return failed<std::vector<tensor>>(
          make_error(errc::unavailable,
                     options_.name + ": " + id + " was lost with the runtime that held it"));
    auto request = session_->cap.inferRequest();
    request.setModelId(id);
    request.setBatch(batch);
    // In flight until the answer, the loss or the timeout: a crash's suspects (end_session).
    auto running = running_.insert(id);
    auto list = request.initInputs(static_cast<unsigned>(inputs.size()));
    for (unsigned i = 0; i < inputs.size(); ++i)
      write_tensor(inputs[i], list[i]);
    auto answer =
        request.send().then([this, id](capnp::Response<remote::ModelRuntime::InferResults>&& r)
                                -> expected<std::vector<tensor>> {
          if (auto e = read_error(r.getError())) return *e;
          auto outputs = read_tensors(r.getOutputs());
          if (!outputs)  // the runtime's fault, not the client's
            return make_error(errc::internal,
                              "runtime " + options_.name + " answered model " + id +
                                  " with a malformed output: " + outputs.error().message);
          return outputs;
        });
    return timed(answer.catch_([this](kj::Exception&& e) -> expected<std::vector<tensor>> {
             return lost(e);
           }),
                 options_.infer_timeout,
                 [this, id]() -> expected<std::vector<tensor>> {
                   return make_error(errc::timeout,
                                     options_.name + ": inference of " + id + " took longer than " +
                                         remote_link_detail::millis(options_.infer_timeout));
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
  void infer_then(const std::string& id, std::uint64_t generation,
                  const std::vector<tensor>& inputs, std::uint64_t batch,
                  resident_model::run_done done) {
    // Called once, whatever happens; a continuation dropped unrun (the link stopping) answers too.
    struct once {
      resident_model::run_done done;
      std::atomic<bool> called{false};
      void operator()(expected<std::vector<tensor>> r) {
        if (!called.exchange(true)) done(std::move(r));
      }
      ~once() {
        if (!called.exchange(true))
          done(make_error(errc::unavailable,
                          "the runtime link stopped before the inference was answered"));
      }
    };
    auto answer = std::make_shared<once>();
    answer->done = std::move(done);
    auto sent = call<bool>([&]() -> kj::Promise<expected<bool>> {
      send_infer(id, generation, inputs, batch)
          .then([answer](expected<std::vector<tensor>> r) { (*answer)(std::move(r)); })
          .detach([answer](kj::Exception&& e) {
            (*answer)(
                make_error(errc::internal, "inference: " + std::string(e.getDescription().cStr())));
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
      return timed(answer.catch_([](kj::Exception&&) -> expected<bool> { return true; }),
                   options_.call_timeout, [] { return expected<bool>(true); });
    });
  }

 private:
  struct session {
    std::uint64_t generation = 0;
    pid_t pid = 0;
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> client;
    remote::ModelRuntime::Client cap = nullptr;
    remote_link_detail::steady::time_point up_since = remote_link_detail::steady::now();
  };

  // Runs `f` on the link thread and waits for the promise it returns. unavailable when the link
  // has stopped.
  template <typename T, typename F>
  expected<T> call(F&& f) {
    const kj::Executor* executor;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      started_.wait(lock, [&] { return executor_ || exited_; });
      if (!executor_ || exited_)
        return make_error(errc::unavailable, options_.name + ": the runtime link has stopped");
      executor = executor_.get();
    }
    try {
      return executor->executeSync(std::forward<F>(f));
    } catch (const kj::Exception& e) {
      return make_error(errc::unavailable,
                        options_.name + ": " + std::string(e.getDescription().cStr()));
    }
  }

  template <typename T>
  static kj::Promise<expected<T>> failed(warm::error e) {
    return kj::Promise<expected<T>>(expected<T>(std::move(e)));
  }

  template <typename T, typename Fallback>
  kj::Promise<T> timed(kj::Promise<T> answer, std::chrono::milliseconds limit, Fallback fallback) {
    return answer.exclusiveJoin(io_->provider->getTimer()
                                    .afterDelay(remote_link_detail::to_kj(limit))
                                    .then(std::move(fallback)));
  }

  warm::error down_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return make_error(errc::unavailable, options_.name + ": the runtime is not ready" +
                                             (why_down_.empty() ? "" : " (" + why_down_ + ")"));
  }
  warm::error lost(const kj::Exception& e) const {
    return make_error(errc::unavailable,
                      options_.name + ": the connection to the runtime was lost during the call (" +
                          std::string(e.getDescription().cStr()) + ")");
  }
  warm::error timeout_error(const char* what) const {
    return make_error(errc::timeout, options_.name + ": " + what + " not answered within " +
                                         remote_link_detail::millis(options_.call_timeout));
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

  void run();

  // Connects, serves the session until it ends, waits the back-off, and again, until stopped.
  kj::Promise<void> supervise();

  kj::Promise<kj::Own<kj::AsyncIoStream>> open_stream();

  // One connection's life: resolves (or fails) with why it ended.
  kj::Promise<std::string> session_life();

  // Asks the status; a status not answered within `limit` ends the session (a hung runtime).
  kj::Promise<void> ask_status(std::chrono::milliseconds limit, bool first);

  kj::Promise<std::string> poll_status();

  // Takes in a status: kinds, version, load slots, capacity, the memory held beyond the models
  // and readiness, each bounded (runtime_limits). On a session's first status, unloads what the
  // runtime holds that this session did not place (a runtime that outlived an earlier warmd).
  kj::Promise<void> adopt(remote::RuntimeStatus::Reader status, bool first);

  // Unloads the ids a session's first status lists, runtime_limits::unloads_at_once at a time
  // (each answer, or throw, lets the next go). A list past runtime_limits::loaded_ids is refused
  // (logged): nothing is unloaded, and what the runtime holds is its own affair.
  kj::Promise<void> unload_orphans(capnp::List<capnp::Text>::Reader listed);

  // One lane of unload_orphans: unloads ids[next++] and goes on until none is left (or the
  // connection is gone).
  kj::Promise<void> unload_next(std::shared_ptr<const std::vector<std::string>> ids,
                                std::shared_ptr<std::size_t> next);

  // Charges the device what the runtime's process holds beyond its memory at start, its models'
  // charges and options_.rss_slack (0 when it does not measure: rss == 0), and stops charging
  // what it no longer holds. Returns whether the charge changed.
  bool charge_beyond_models(std::uint64_t rss, std::uint64_t base);

  // Ends the current session (if any): drops the connection, reaps the process, and reports the
  // models lost. Returns the back-off before the next attempt.
  std::chrono::milliseconds end_session(const std::string& why, bool restart);

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
  remote_link_detail::load_slots loads_;

  // The link thread's own.
  std::atomic<std::thread::id> link_thread_{};
  kj::AsyncIoContext* io_ = nullptr;
  kj::Own<session> session_;
  pid_t pending_pid_ = 0;
  std::chrono::milliseconds backoff_ = options_.restart_min;
  std::multiset<std::string>
      running_;                      // link thread only: the inferences sent and not yet answered
  memory_reservation unattributed_;  // link thread only: the process's memory beyond its models

  kj::Thread thread_;  // last: starts once everything above is constructed
};

}  // namespace warm
