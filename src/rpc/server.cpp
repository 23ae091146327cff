#include "rpc/server.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <kj/async.h>

#include "rpc/convert.hpp"
#include "warm/runtime.hpp"

namespace warm::rpc {

namespace {

// The CAF -> kj bridge: a callback for the runtime (called once, on a warm thread) and the
// promise it fulfils on this kj thread. The fulfiller may outlive the promise (a client that
// hangs up): fulfilling it then does nothing. The value travels boxed (GCC 12 warns falsely about
// a std::variant inside kj's ExceptionOr).
template <class T>
using boxed = kj::Own<expected<T>>;

template <class T>
struct bridge {
  kj::Promise<boxed<T>> promise;
  callback<T> done;
};

template <class T>
bridge<T> make_bridge() {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<boxed<T>>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<boxed<T>>>>(kj::mv(paf.fulfiller));
  callback<T> done = [fulfiller](expected<T> value) {
    (*fulfiller)->fulfill(kj::heap<expected<T>>(std::move(value)));
  };
  return {kj::mv(paf.promise), std::move(done)};
}

void write_status(const expected<void>& r, Status::Builder out) {
  if (r)
    set_ok(out);
  else
    to_capnp(r.error(), out);
}

// One watcher's events between the runtime's watch hub (a warm thread) and the kj thread.
struct watch_queue {
  // An event and how many of this watch's events were dropped just before it.
  struct entry {
    model_event event;
    std::uint64_t missed = 0;
  };
  std::mutex mutex;
  std::deque<entry> events;                             // guarded by mutex
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake;  // set while the kj side waits; guarded
  bool closed = false;                                  // guarded
  std::size_t capacity = 4096;

  // Called on a warm thread: queue the event, wake the kj side if it waits. Never blocks on it.
  // Past capacity the oldest event is dropped and counted on the one after it.
  void push(const model_event& event) {
    std::lock_guard lock(mutex);
    if (closed) return;
    events.push_back({event, 0});
    if (events.size() > capacity) {
      std::uint64_t missed = events.front().missed + 1;
      events.pop_front();
      events.front().missed += missed;
    }
    if (wake) {
      wake->fulfill();
      wake = nullptr;
    }
  }
};

// A watch: forwards queued events to the client's listener in order until it is dropped (the
// client released its handle or disconnected) or the listener fails. Counts itself in `counts`
// while it lives.
class watch_handle final : public WatchHandle::Server {
 public:
  watch_handle(warm::runtime& rt, StateListener::Client listener, std::size_t capacity,
               std::shared_ptr<watch_counts> counts)
      : rt_(rt),
        listener_(kj::mv(listener)),
        queue_(std::make_shared<watch_queue>()),
        counts_(std::move(counts)) {
    ++counts_->connection;
    ++*counts_->total;
    queue_->capacity = std::max<std::size_t>(capacity, 1);
    auto queue = queue_;
    id_ = rt_.watch([queue](const model_event& event) { queue->push(event); });
    pump_ = pump().eagerlyEvaluate([this](kj::Exception&&) { close(); });
  }

  ~watch_handle() noexcept(false) {
    close();
    --counts_->connection;
    --*counts_->total;
  }

 private:
  void close() {
    if (closed_) return;
    closed_ = true;
    rt_.unwatch(id_);
    std::lock_guard lock(queue_->mutex);
    queue_->closed = true;
    queue_->events.clear();
    queue_->wake = nullptr;  // destroyed here, on the kj thread
  }

  // Sends everything queued (in order; Cap'n Proto delivers calls on one capability in order),
  // waits for the listener to take it, and starts over; sleeps while the queue is empty. At most
  // one batch (≤ capacity events) is in Cap'n Proto's hands at a time, so a listener that does not
  // answer holds this watch's memory to two queues' worth.
  kj::Promise<void> pump() {
    std::deque<watch_queue::entry> batch;
    {
      std::lock_guard lock(queue_->mutex);
      if (queue_->closed) return kj::READY_NOW;
      if (queue_->events.empty()) {
        auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
        queue_->wake = kj::mv(paf.fulfiller);
        return paf.promise.then([this] { return pump(); });
      }
      batch.swap(queue_->events);
    }
    auto calls = kj::heapArrayBuilder<kj::Promise<void>>(batch.size());
    for (const auto& entry : batch) {
      auto request = listener_.modelStateChangedRequest();
      auto event = request.initEvent();
      to_capnp(entry.event, event);
      event.setMissed(entry.missed);
      calls.add(request.send().ignoreResult());
    }
    return kj::joinPromises(calls.finish()).then([this] { return pump(); });
  }

  warm::runtime& rt_;
  StateListener::Client listener_;
  std::shared_ptr<watch_queue> queue_;
  std::shared_ptr<watch_counts> counts_;
  std::uint64_t id_ = 0;
  bool closed_ = false;
  kj::Promise<void> pump_ = nullptr;
};

}  // namespace

// ---- warm_server ---------------------------------------------------------------------------

struct warm_server::guard {
  in_flight_counter counter;
  explicit guard(in_flight_counter c) : counter(std::move(c)) {
    if (counter) counter->fetch_add(1);
  }
  ~guard() {
    if (counter) counter->fetch_sub(1);
  }
};

warm_server::warm_server(warm::runtime& rt, server_options options, in_flight_counter in_flight,
                         std::shared_ptr<std::uint32_t> all_watchers)
    : rt_(rt),
      options_(options),
      in_flight_(std::move(in_flight)),
      watchers_(std::make_shared<watch_counts>()) {
  if (all_watchers) watchers_->total = std::move(all_watchers);
}

kj::Own<warm_server::guard> warm_server::track() const {
  return kj::heap<guard>(in_flight_);
}

bool warm_server::fits(capnp::MessageSize size, Status::Builder status) const {
  std::uint64_t bytes = size.wordCount * 8;
  if (bytes <= options_.max_request_bytes) return true;
  set_status(status, Status::Code::TOO_LARGE,
             "request is " + std::to_string(bytes) + " bytes, the limit is " +
                 std::to_string(options_.max_request_bytes));
  return false;
}

kj::Promise<void> warm_server::registerModel(RegisterModelContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<void>();
  rt_.register_model(to_std(params.getId()), from_capnp(params.getInfo()), params.getLoadNow(),
                     params.getSync(), std::move(b.done));
  return b.promise
      .then([context](boxed<void> box) mutable {
        write_status(*box, context.getResults().getStatus());
      })
      .attach(track());
}

kj::Promise<void> warm_server::unregisterModel(UnregisterModelContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<void>();
  rt_.unregister_model(to_std(params.getId()), std::move(b.done));
  return b.promise
      .then([context](boxed<void> box) mutable {
        write_status(*box, context.getResults().getStatus());
      })
      .attach(track());
}

kj::Promise<void> warm_server::getModelStatus(GetModelStatusContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<model_status>();
  rt_.status(to_std(params.getId()), std::move(b.done));
  return b.promise
      .then([context](boxed<model_status> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        to_capnp(*r, results.initModel());
      })
      .attach(track());
}

kj::Promise<void> warm_server::ensureLoaded(EnsureLoadedContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<void>();
  rt_.ensure_loaded(to_std(params.getId()), params.getSync(), std::move(b.done));
  return b.promise
      .then([context](boxed<void> box) mutable {
        write_status(*box, context.getResults().getStatus());
      })
      .attach(track());
}

namespace {

template <class Results>
void write_vmodel(expected<vmodel_status>& r, Results results) {
  if (!r) return to_capnp(r.error(), results.getStatus());
  set_ok(results.getStatus());
  to_capnp(*r, results.initVmodel());
}

}  // namespace

kj::Promise<void> warm_server::setVModel(SetVModelContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  std::optional<std::string> expected_target;
  if (params.hasExpectedTarget()) expected_target = to_std(params.getExpectedTarget());
  auto b = make_bridge<vmodel_status>();
  rt_.set_vmodel(to_std(params.getId()), to_std(params.getTarget()), params.getAutoDeleteTarget(),
                 std::move(expected_target), std::move(b.done));
  return b.promise
      .then(
          [context](boxed<vmodel_status> box) mutable { write_vmodel(*box, context.getResults()); })
      .attach(track());
}

kj::Promise<void> warm_server::deleteVModel(DeleteVModelContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<void>();
  rt_.delete_vmodel(to_std(params.getId()), std::move(b.done));
  return b.promise
      .then([context](boxed<void> box) mutable {
        write_status(*box, context.getResults().getStatus());
      })
      .attach(track());
}

kj::Promise<void> warm_server::retry(RetryContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<void>();
  rt_.retry(to_std(params.getId()), std::move(b.done));
  return b.promise
      .then([context](boxed<void> box) mutable {
        write_status(*box, context.getResults().getStatus());
      })
      .attach(track());
}

kj::Promise<void> warm_server::servedModels(ServedModelsContext context) {
  auto b = make_bridge<std::vector<served_model_status>>();
  rt_.served(std::move(b.done));
  return b.promise
      .then([context](boxed<std::vector<served_model_status>> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        auto list = results.initModels(static_cast<unsigned>(r->size()));
        for (unsigned i = 0; i < r->size(); ++i)
          to_capnp(r->at(i), list[i]);
      })
      .attach(track());
}

kj::Promise<void> warm_server::reload(ReloadContext context) {
  if (!options_.reload) {
    set_status(context.getResults().getStatus(), Status::Code::UNAVAILABLE,
               "this server has no configuration to reload");
    return kj::READY_NOW;
  }
  auto b = make_bridge<std::uint32_t>();
  options_.reload(std::move(b.done));
  return b.promise
      .then([context](boxed<std::uint32_t> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        results.setModels(*r);
      })
      .attach(track());
}

kj::Promise<void> warm_server::clusterInfo(ClusterInfoContext context) {
  if (!options_.cluster) {
    set_ok(context.getResults().getStatus());
    context.getResults().initCluster().setEnabled(false);
    return kj::READY_NOW;
  }
  auto b = make_bridge<warm::cluster_info>();
  options_.cluster(std::move(b.done));
  return b.promise
      .then([context](boxed<warm::cluster_info> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        to_capnp(*r, results.initCluster());
      })
      .attach(track());
}

kj::Promise<void> warm_server::getVModelStatus(GetVModelStatusContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  auto b = make_bridge<vmodel_status>();
  rt_.vmodel_status(to_std(params.getId()), std::move(b.done));
  return b.promise
      .then(
          [context](boxed<vmodel_status> box) mutable { write_vmodel(*box, context.getResults()); })
      .attach(track());
}

kj::Promise<void> warm_server::listModels(ListModelsContext context) {
  auto params = context.getParams();
  if (!fits(params.totalSize(), context.getResults().getStatus())) return kj::READY_NOW;
  std::uint32_t limit = params.getLimit() == 0 ? options_.page_size : params.getLimit();
  limit = std::max<std::uint32_t>(1, std::min(limit, options_.max_page_size));
  auto b = make_bridge<std::vector<model_status>>();
  rt_.list_models(to_std(params.getAfter()), limit + 1,
                  std::move(b.done));  // one more: is there a next page?
  return b.promise
      .then([context, limit](boxed<std::vector<model_status>> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        auto& models = *r;
        bool more = models.size() > limit;
        if (more) models.resize(limit);
        auto list = results.initModels(static_cast<unsigned>(models.size()));
        for (unsigned i = 0; i < models.size(); ++i)
          to_capnp(models[i], list[i]);
        results.setNext(more ? to_text(models.back().id) : capnp::Text::Reader(""));
      })
      .attach(track());
}

static kj::Promise<void> serve_inference(warm::runtime& rt, infer_context context, bool forwarded);

kj::Promise<void> warm_server::infer(InferContext context) {
  auto params = context.getParams();
  auto status = context.getResults().getStatus();
  if (!fits(params.totalSize(), status)) return kj::READY_NOW;
  auto request = params.getRequest();
  auto inputs = request.getInputs();
  if (inputs.size() > options_.max_tensors) {
    set_status(status, Status::Code::TOO_LARGE,
               std::to_string(inputs.size()) + " input tensors, the limit is " +
                   std::to_string(options_.max_tensors));
    return kj::READY_NOW;
  }
  for (unsigned i = 0; i < inputs.size(); ++i) {
    auto bytes = inputs[i].getData().size();
    if (bytes > options_.max_tensor_bytes) {
      set_status(status, Status::Code::TOO_LARGE,
                 "input " + std::to_string(i) + " is " + std::to_string(bytes) +
                     " bytes, the limit is " + std::to_string(options_.max_tensor_bytes));
      return kj::READY_NOW;
    }
  }
  if (options_.relay) {
    auto& rt = rt_;
    KJ_IF_MAYBE (relayed, options_.relay(context, [&rt, context]() {
                   return serve_inference(rt, context, true);
                 })) {
      return kj::mv(*relayed).attach(track());
    }
  }
  return serve_inference(rt_, context, false).attach(track());
}

// The runtime serves the inference (`forwarded`: it is not passed on to another instance).
static kj::Promise<void> serve_inference(warm::runtime& rt, infer_context context, bool forwarded) {
  auto status = context.getResults().getStatus();
  auto converted = from_capnp(context.getParams().getRequest());
  context.releaseParams();  // the request is copied; free the message before the inference
  if (!converted) {
    to_capnp(converted.error(), status);
    return kj::READY_NOW;
  }
  if (forwarded) converted->forwarded = true;
  auto fill = [](infer_context& context, expected<infer_result>& r) {
    auto results = context.getResults();
    if (!r) return to_capnp(r.error(), results.getStatus());
    set_ok(results.getStatus());
    to_capnp(*r, results.initResult());
  };
  // A hit within the runtime's inline_inference_limit runs on this thread, inside rt_.infer:
  // answer it at once instead of through the cross-thread fulfiller, which would wake this event
  // loop for a result it has. Anything answered from another thread (a miss, or a hit too heavy
  // to run inline, which the runtime hands to its inference threads so that this loop keeps
  // serving other connections) goes through the bridge.
  struct inline_answer {
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<bool> in_call{true};
    std::optional<expected<infer_result>> value;
  };
  auto answer = std::make_shared<inline_answer>();
  auto b = make_bridge<infer_result>();
  rt.infer(std::move(*converted), [answer, done = std::move(b.done)](expected<infer_result> r) {
    if (answer->in_call.load() && std::this_thread::get_id() == answer->caller) {
      answer->value = std::move(r);
      return;
    }
    done(std::move(r));
  });
  answer->in_call = false;
  if (answer->value) {
    fill(context, *answer->value);
    return kj::READY_NOW;
  }
  return b.promise.then([context, fill](boxed<infer_result> box) mutable { fill(context, *box); });
}

kj::Promise<void> warm_server::inspect(InspectContext context) {
  auto b = make_bridge<inspection>();
  rt_.inspect(std::move(b.done));
  return b.promise
      .then([context](boxed<inspection> box) mutable {
        auto& r = *box;
        auto results = context.getResults();
        if (!r) return to_capnp(r.error(), results.getStatus());
        set_ok(results.getStatus());
        to_capnp(*r, results.initInspection());
      })
      .attach(track());
}

kj::Promise<void> warm_server::watch(WatchContext context) {
  auto results = context.getResults();
  if (watchers_->connection >= options_.max_watchers_per_connection) {
    set_status(results.getStatus(), Status::Code::CAPACITY_EXHAUSTED,
               std::to_string(watchers_->connection) +
                   " watchers on this connection, the limit is " +
                   std::to_string(options_.max_watchers_per_connection));
    return kj::READY_NOW;
  }
  if (*watchers_->total >= options_.max_watchers) {
    set_status(results.getStatus(), Status::Code::CAPACITY_EXHAUSTED,
               std::to_string(*watchers_->total) + " watchers on this server, the limit is " +
                   std::to_string(options_.max_watchers));
    return kj::READY_NOW;
  }
  set_ok(results.getStatus());
  results.setHandle(kj::heap<watch_handle>(rt_, context.getParams().getListener(),
                                           options_.max_queued_events, watchers_));
  return kj::READY_NOW;
}

// ---- authenticator -------------------------------------------------------------------------

}  // namespace warm::rpc
