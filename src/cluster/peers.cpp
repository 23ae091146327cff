#include "cluster/peers.hpp"

#include <kj/thread.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include "cluster/peer_links.hpp"
#include "rpc/convert.hpp"

namespace warm::cluster {

namespace {

// A forward's (or an ensure's) callback, called exactly once: by the peer's answer, the fallback,
// or (when the client stops with the call in flight) with unavailable as the last copy goes.
template <typename T>
class answer_once {
 public:
  explicit answer_once(callback<T> done) : done_(std::move(done)) {}
  ~answer_once() {
    if (done_) done_(make_error(errc::unavailable, "warmd is stopping"));
  }
  void operator()(expected<T> r) {
    if (auto d = std::exchange(done_, nullptr)) d(std::move(r));
  }
  callback<T> release() { return std::exchange(done_, nullptr); }

 private:
  callback<T> done_;
};

struct failure_log : kj::TaskSet::ErrorHandler {
  void taskFailed(kj::Exception&&) override {}  // every forward catches its own failure
};

}  // namespace

struct peer_client::impl {
  options opts;
  std::atomic<std::uint64_t> forwarded{0}, fell_back{0};
  mutable std::mutex counts_mutex;
  std::map<std::string, std::uint32_t> in_flight;  // forwards not answered yet, by address

  std::mutex mutex;
  std::condition_variable started;
  kj::Own<const kj::Executor> executor;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop;
  kj::Own<kj::Thread> thread;

  // Work handed over by other threads (post), guarded by mutex. `wake` is set while the client's
  // thread waits for some: posting fulfils it. Posting never waits for the client's thread, so a
  // forward costs the caller (warmd's RPC thread) one lock, not a thread switch.
  std::vector<std::function<void()>> posted;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake;

  // The client's thread only.
  kj::AsyncIoContext* io = nullptr;
  kj::TaskSet* tasks = nullptr;
  std::unique_ptr<peer_links> peers;

  void run() {
    auto context = kj::setupAsyncIo();
    auto stopped = kj::newPromiseAndCrossThreadFulfiller<void>();
    failure_log errors;
    kj::TaskSet forwards(errors);
    io = &context;
    tasks = &forwards;
    peers =
        std::make_unique<peer_links>(*context.provider, opts.token, opts.connect_timeout, opts.tls);
    {
      std::lock_guard<std::mutex> lock(mutex);
      executor = kj::getCurrentThreadExecutor().addRef();
      stop = kj::mv(stopped.fulfiller);
    }
    started.notify_all();
    auto taking = take_posted().eagerlyEvaluate(nullptr);
    stopped.promise.wait(context.waitScope);
    std::vector<std::function<void()>> unrun;
    {
      std::lock_guard<std::mutex> lock(mutex);
      wake = nullptr;
      unrun.swap(posted);
    }
    // Forwards in flight, and those never started, are dropped here: their answer_once tells
    // their callers.
    unrun.clear();
    peers.reset();
    tasks = nullptr;
  }

  void post(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex);
    posted.push_back(std::move(job));
    if (wake) {
      wake->fulfill();
      wake = nullptr;
    }
  }

  // Runs what was posted, in order, then waits for more.
  kj::Promise<void> take_posted() {
    auto woken = kj::newPromiseAndCrossThreadFulfiller<void>();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (posted.empty())
        wake = kj::mv(woken.fulfiller);
      else
        woken.fulfiller->fulfill();
    }
    return woken.promise.then([this] {
      std::vector<std::function<void()>> jobs;
      {
        std::lock_guard<std::mutex> lock(mutex);
        jobs.swap(posted);
      }
      for (auto& job : jobs)
        job();
      return take_posted();
    });
  }

  void forward(const std::string& address, std::shared_ptr<infer_request> request,
               std::shared_ptr<answer_once<infer_result>> answer) {
    auto p = peers->get(address);
    auto call = p->warm.addBranch().then([request](rpc::Warm::Client w) {
      auto r = w.inferRequest();
      rpc::to_capnp(*request, r.initRequest());
      return r.send();
    });
    auto answered =
        io->provider->getTimer()
            .timeoutAfter(opts.call_timeout.count() * kj::MILLISECONDS, kj::mv(call))
            .then(
                [this, request, answer](capnp::Response<rpc::Warm::InferResults>&& reply) {
                  auto status = rpc::from_capnp(reply.getStatus());
                  if (!status && status.error().code == errc::unavailable)
                    return fall_back("it is unavailable: " + status.error().message, request,
                                     answer);
                  ++forwarded;
                  if (!status) return (*answer)(status.error());
                  (*answer)(rpc::from_capnp(reply.getResult()));
                },
                [this, p, request, answer](kj::Exception&& e) {
                  p->lost = true;  // connect again next time
                  fall_back(e.getDescription().cStr(), request, answer);
                });
    tasks->add(kj::mv(answered));
  }

  void ensure(const std::string& address, const std::string& model,
              std::shared_ptr<answer_once<void>> done) {
    auto p = peers->get(address);
    auto call = p->warm.addBranch().then([model](rpc::Warm::Client w) {
      auto r = w.ensureLoadedRequest();
      r.setId(model);
      r.setSync(true);
      return r.send();
    });
    auto answered =
        io->provider->getTimer()
            .timeoutAfter(opts.call_timeout.count() * kj::MILLISECONDS, kj::mv(call))
            .then(
                [done](capnp::Response<rpc::Warm::EnsureLoadedResults>&& reply) {
                  (*done)(rpc::from_capnp(reply.getStatus()));
                },
                [p, done, address](kj::Exception&& e) {
                  p->lost = true;
                  (*done)(make_error(errc::unavailable,
                                     "cannot reach " + address + ": " + e.getDescription().cStr()));
                });
    tasks->add(kj::mv(answered));
  }

  void fall_back(const std::string& why, const std::shared_ptr<infer_request>& request,
                 const std::shared_ptr<answer_once<infer_result>>& answer) {
    ++fell_back;
    if (opts.log)
      opts.log("cluster: cannot forward " + request->target + ": " + why + "; serving it here");
    opts.fallback(std::move(*request), answer->release());
  }
};

expected<std::unique_ptr<peer_client>> peer_client::start(options o) {
  if (!o.fallback) return make_error(errc::invalid_argument, "forwarding needs a fallback");
  auto i = std::make_unique<impl>();
  i->opts = std::move(o);
  auto* raw = i.get();
  i->thread = kj::heap<kj::Thread>([raw] { raw->run(); });
  std::unique_lock<std::mutex> lock(raw->mutex);
  raw->started.wait(lock, [raw] { return raw->executor.get() != nullptr; });
  return std::unique_ptr<peer_client>(new peer_client(std::move(i)));
}

peer_client::peer_client(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

peer_client::~peer_client() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop->fulfill();
  }
  impl_->thread = nullptr;  // joins
}

void peer_client::infer(const std::string& address, infer_request request,
                        callback<infer_result> done) {
  request.forwarded = true;
  auto req = std::make_shared<infer_request>(std::move(request));
  auto* i = impl_.get();
  {
    std::lock_guard<std::mutex> lock(i->counts_mutex);
    ++i->in_flight[address];
  }
  auto answer = std::make_shared<answer_once<infer_result>>(
      [i, address, done = std::move(done)](expected<infer_result> r) mutable {
        {
          std::lock_guard<std::mutex> lock(i->counts_mutex);
          if (auto it = i->in_flight.find(address); it != i->in_flight.end() && --it->second == 0)
            i->in_flight.erase(it);
        }
        done(std::move(r));
      });
  i->post([i, address, req, answer] { i->forward(address, req, answer); });
}

void peer_client::ensure(const std::string& address, const std::string& model,
                         callback<void> done) {
  auto answer = std::make_shared<answer_once<void>>(std::move(done));
  auto* i = impl_.get();
  i->post([i, address, model, answer] { i->ensure(address, model, answer); });
}

std::uint32_t peer_client::in_flight(const std::string& address) const {
  std::lock_guard<std::mutex> lock(impl_->counts_mutex);
  auto it = impl_->in_flight.find(address);
  return it == impl_->in_flight.end() ? 0 : it->second;
}

std::uint64_t peer_client::forwarded() const {
  return impl_->forwarded;
}
std::uint64_t peer_client::fell_back() const {
  return impl_->fell_back;
}

}  // namespace warm::cluster
