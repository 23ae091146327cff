// GCC 12 warns that the std::variant inside warm::expected, carried through kj promises, "may be
// used uninitialized": a false positive (as in tools/warm-runtime/server.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "bridge.hpp"

#include <kj/async.h>

#include <algorithm>
#include <deque>
#include <iostream>
#include <map>
#include <thread>

#include "grpc_call.hpp"
#include "kserve_v2.grpc.pb.h"
#include "model_runtime.grpc.pb.h"
#include "remote/tensors.hpp"
#include "status_map.hpp"
#include "storage/runtime_manifest.hpp"
#include "v2_tensors.hpp"

namespace warm::mmesh {
namespace {

using namespace std::chrono_literals;
using status_response = ::mmesh::RuntimeStatusResponse;

constexpr std::uint64_t max_capacity = std::uint64_t{1} << 50;  // 1 PiB, warmd's bound too
constexpr std::size_t max_version_bytes = 200;

// Runs blocking `work` (a manifest's small reads) on a thread of its own and answers on the
// calling loop.
template <typename T>
kj::Promise<T> off_loop(std::function<T()> work) {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<T>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<T>>>(kj::mv(paf.fulfiller));
  std::thread([fulfiller, work = std::move(work)] { (*fulfiller)->fulfill(work()); }).detach();
  return kj::mv(paf.promise);
}

// What loadModel and predictModelSize are told about a model.
struct model_target {
  std::string type;
  std::string path;
  std::string key;
};

// A warm.json manifest's type, target and key; any other file as itself with no key. Blocking.
expected<model_target> resolve_target(const model_location& where) {
  if (!is_manifest(where.path)) return model_target{where.kind, where.path, ""};
  auto manifest = read_runtime_manifest(where);
  if (!manifest) return std::move(manifest).error();
  auto target = manifest_target(where, *manifest);
  if (!target) return std::move(target).error();
  return model_target{manifest->type, *target, manifest->key};
}

struct model_entry;

// One inference's turn on a model whose runtime limits its concurrency; empty: no turn (the
// model was unloaded while it waited). Releasing it (destruction) hands the turn to the first
// inference still waiting, in FIFO order.
class turn {
 public:
  turn() = default;
  explicit turn(std::shared_ptr<model_entry> entry) : entry_(std::move(entry)) {}
  turn(turn&& other) noexcept = default;
  turn& operator=(turn&& other) noexcept {
    release();
    entry_ = std::move(other.entry_);
    return *this;
  }
  ~turn() { release(); }
  explicit operator bool() const { return entry_ != nullptr; }

 private:
  void release();
  std::shared_ptr<model_entry> entry_;
};

// A model the bridge has asked the runtime to load. Touched on the event loop only.
struct model_entry {
  bool loaded = false;                                      // loading until the load answered
  std::uint64_t bytes = 0;                                  // what the runtime said it takes
  unsigned max_concurrency = 0;                             // inferences at once; 0: no limit
  unsigned running = 0;                                     // inferences holding a turn
  std::deque<kj::Own<kj::PromiseFulfiller<turn>>> waiting;  // FIFO
  kj::Canceler loading;  // the load in flight, cancelled by an unload
};

void turn::release() {
  if (!entry_) return;
  auto entry = std::move(entry_);
  while (!entry->waiting.empty()) {
    auto next = kj::mv(entry->waiting.front());
    entry->waiting.pop_front();
    if (next->isWaiting()) {  // the turn passes on; `running` stays
      next->fulfill(turn(entry));
      return;
    }
  }
  --entry->running;
}

// A turn now when the model has room, else one when an inference before it ends.
kj::Promise<turn> take_turn(const std::shared_ptr<model_entry>& entry) {
  if (entry->max_concurrency == 0 || entry->running < entry->max_concurrency) {
    ++entry->running;
    return turn(entry);
  }
  auto paf = kj::newPromiseAndFulfiller<turn>();
  entry->waiting.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

// What a load found out.
struct load_outcome {
  std::uint64_t bytes = 0;
  unsigned max_concurrency = 0;
  model_io io;
};

class bridge final : public remote::ModelRuntime::Server {
 public:
  bridge(std::shared_ptr<grpc::Channel> channel, bridge_options options)
      : options_(std::move(options)),
        spi_(::mmesh::ModelRuntime::NewStub(channel)),
        v2_(inference::GRPCInferenceService::NewStub(channel)) {}

 protected:
  kj::Promise<void> status(StatusContext context) override {
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      spi_->async()->runtimeStatus(c, rq, rs, std::move(done));
    };
    return call<::mmesh::RuntimeStatusRequest, status_response>(start, {}, options_.status_deadline)
        .then(
            [this, context](answer<status_response> a) mutable -> kj::Promise<void> {
              auto lost = models_lost(a);
              write_status(&a, context.getResults().initStatus());
              if (lost.empty()) return kj::READY_NOW;
              context.getResults().getStatus().setReady(false);
              return end_after_unloading(std::move(lost));
            },
            [this, context](kj::Exception&&) mutable {
              write_status(nullptr, context.getResults().initStatus());
            });
  }

  kj::Promise<void> predictSize(PredictSizeContext context) override {
    auto params = context.getParams();
    std::string id = params.getModelId();
    auto where = read_model_file(params.getFile());
    return off_loop<expected<model_target>>([where] { return resolve_target(where); })
        .then([this, id](expected<model_target> target) -> kj::Promise<std::uint64_t> {
          if (!target) return std::uint64_t{0};  // the load says what is wrong
          ::mmesh::PredictModelSizeRequest request;
          request.set_modelid(id);
          request.set_modeltype(target->type);
          request.set_modelpath(target->path);
          request.set_modelkey(target->key);
          auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
            spi_->async()->predictModelSize(c, rq, rs, std::move(done));
          };
          return call<::mmesh::PredictModelSizeRequest, ::mmesh::PredictModelSizeResponse>(
                     start, std::move(request), options_.predict_deadline, id)
              .then([](auto a) -> std::uint64_t {
                return a.status.ok() ? a.response.sizeinbytes() : 0;  // UNIMPLEMENTED: none
              });
        })
        .then([context](std::uint64_t bytes) mutable {
          auto results = context.getResults();
          write_ok(results.initError());
          results.setBytes(bytes);
        });
  }

  kj::Promise<void> load(LoadContext context) override {
    auto params = context.getParams();
    std::string id = params.getModelId();
    auto where = read_model_file(params.getFile());
    const std::uint64_t reserved = params.getReservedBytes();
    if (models_.count(id)) {
      write_error(make_error(errc::invalid_argument, id + " is already loaded"),
                  context.getResults().initError());
      return kj::READY_NOW;
    }
    auto entry = std::make_shared<model_entry>();
    models_[id] = entry;
    auto steps =
        off_loop<expected<model_target>>([where] { return resolve_target(where); })
            .then([this, id,
                   reserved](expected<model_target> target) -> kj::Promise<expected<load_outcome>> {
              if (!target) return expected<load_outcome>(std::move(target).error());
              return load_model(id, std::move(*target), reserved);
            });
    return entry->loading.wrap(kj::mv(steps))
        .then(
            [this, context, id, entry](expected<load_outcome> outcome) mutable {
              finish_load(context, id, entry, std::move(outcome));
            },
            [this, context, id, entry](kj::Exception&& e) mutable {
              // An unload cancelled it (the entry is gone), or the bridge failed.
              finish_load(
                  context, id, entry,
                  make_error(errc::unavailable, id + " was unloaded while it loaded (" +
                                                    std::string(e.getDescription().cStr()) + ")"));
            });
  }

  kj::Promise<void> unload(UnloadContext context) override {
    std::string id = context.getParams().getModelId();
    auto it = models_.find(id);
    const bool known = it != models_.end();
    if (known) forget(it);
    ::mmesh::UnloadModelRequest request;
    request.set_modelid(id);
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      spi_->async()->unloadModel(c, rq, rs, std::move(done));
    };
    return call<::mmesh::UnloadModelRequest, ::mmesh::UnloadModelResponse>(
               start, std::move(request), options_.unload_deadline, id)
        .then([context, id, known](answer<::mmesh::UnloadModelResponse> a) mutable {
          auto error = context.getResults().initError();
          if (!known) return write_error(make_error(errc::not_found, id + " is not loaded"), error);
          if (a.status.ok() || a.status.error_code() == grpc::StatusCode::NOT_FOUND)
            return write_ok(error);
          write_error(error_from_status(a.status.error_code(), a.status.error_message(), id,
                                        "unloadModel failed:", call_kind::other),
                      error);
        });
  }

  kj::Promise<void> infer(InferContext context) override {
    auto params = context.getParams();
    std::string id = params.getModelId();
    auto it = models_.find(id);
    if (it == models_.end() || !it->second->loaded) {
      write_error(make_error(errc::not_found, id + " is not loaded"),
                  context.getResults().initError());
      return kj::READY_NOW;
    }
    auto inputs = read_tensors(params.getInputs());
    if (!inputs) {
      write_error(inputs.error(), context.getResults().initError());
      return kj::READY_NOW;
    }
    inference::ModelInferRequest request;
    auto filled = fill_infer_request(id, std::move(*inputs), request);
    if (!filled) {
      write_error(filled.error(), context.getResults().initError());
      return kj::READY_NOW;
    }
    using outputs = expected<std::vector<tensor>>;
    return take_turn(it->second)
        .then([this, context, id,
               request = std::move(request)](turn my_turn) mutable -> kj::Promise<void> {
          if (!my_turn) {
            write_error(make_error(errc::not_found, id + " was unloaded"),
                        context.getResults().initError());
            return kj::READY_NOW;
          }
          auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
            v2_->async()->ModelInfer(c, rq, rs, std::move(done));
          };
          // Decoded on gRPC's thread: the loop only copies the tensors into the reply.
          auto digest = [id](grpc::Status s, inference::ModelInferResponse r) -> outputs {
            if (!s.ok())
              return error_from_status(s.error_code(), s.error_message(), id,
                                       "ModelInfer failed:", call_kind::infer);
            return read_infer_response(id, r);
          };
          return call<outputs, inference::ModelInferRequest, inference::ModelInferResponse>(
                     start, std::move(request), 0ms, id, digest)
              .then([this, id, context, my_turn = kj::mv(my_turn)](outputs out) mutable {
                auto results = context.getResults();
                if (!out && out.error().code == errc::not_found && models_.count(id) && !ending_) {
                  // The runtime no longer holds a model it loaded: it restarted unseen (one
                  // someone else runs) and lost them all.
                  end_after_unloading("it answered NOT_FOUND for " + id + ", which it had loaded")
                      .detach([](kj::Exception&&) {});
                  return write_error(
                      make_error(errc::unavailable, id + ": the runtime lost it (it restarted?): " +
                                                        out.error().message),
                      results.initError());
                }
                write_infer_answer(out, results);
              });
        });
  }

 private:
  // Drops a model from the bridge's books: its load is cancelled, the inferences waiting for a
  // turn answer not_found.
  void forget(std::map<std::string, std::shared_ptr<model_entry>>::iterator it) {
    auto entry = it->second;
    models_.erase(it);
    entry->loading.cancel("unloaded");
    auto waiting = std::move(entry->waiting);
    for (auto& f : waiting)
      f->fulfill(turn());
  }

  // Tells the runtime to unload `id`, answer ignored (cleaning up after a failed load).
  void unload_quietly(const std::string& id) {
    ::mmesh::UnloadModelRequest request;
    request.set_modelid(id);
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      spi_->async()->unloadModel(c, rq, rs, std::move(done));
    };
    call<::mmesh::UnloadModelRequest, ::mmesh::UnloadModelResponse>(start, std::move(request),
                                                                    options_.unload_deadline, id)
        .then([](auto) {})
        .detach([](kj::Exception&&) {});
  }

  // loadModel, then modelSize when it answered 0, then ModelMetadata. Undoes the load (unload)
  // when a step after loadModel fails, or loadModel failed in a way that may leave something.
  kj::Promise<expected<load_outcome>> load_model(const std::string& id, model_target target,
                                                 std::uint64_t reserved) {
    ::mmesh::LoadModelRequest request;
    request.set_modelid(id);
    request.set_modeltype(target.type);
    request.set_modelpath(target.path);
    request.set_modelkey(target.key);
    const auto timeout = std::chrono::milliseconds(load_timeout_ms_);
    const bool limit = limit_concurrency_;
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      spi_->async()->loadModel(c, rq, rs, std::move(done));
    };
    return call<::mmesh::LoadModelRequest, ::mmesh::LoadModelResponse>(start, std::move(request),
                                                                       timeout, id)
        .then([this, id, limit, reserved, timeout](
                  answer<::mmesh::LoadModelResponse> a) -> kj::Promise<expected<load_outcome>> {
          if (!a.status.ok()) {
            const auto code = a.status.error_code();
            if (code != grpc::StatusCode::INVALID_ARGUMENT &&
                code != grpc::StatusCode::FAILED_PRECONDITION)
              unload_quietly(id);
            auto message = code == grpc::StatusCode::DEADLINE_EXCEEDED
                               ? "loadModel did not answer within the runtime's " +
                                     std::to_string(timeout.count()) + " ms:"
                               : std::string("loadModel failed:");
            return expected<load_outcome>(
                error_from_status(code, a.status.error_message(), id, message, call_kind::load));
          }
          load_outcome outcome;
          outcome.bytes = a.response.sizeinbytes();
          outcome.max_concurrency = limit ? a.response.maxconcurrency() : 0;
          kj::Promise<std::uint64_t> size = outcome.bytes;
          if (outcome.bytes == 0) size = model_size(id, reserved);
          return size.then([this, id, outcome](std::uint64_t bytes) mutable {
            outcome.bytes = bytes;
            return describe(id, kj::mv(outcome));
          });
        });
  }

  // modelSize for a model whose load answered 0; `fallback` (warmd's reservation) when it fails.
  kj::Promise<std::uint64_t> model_size(const std::string& id, std::uint64_t fallback) {
    ::mmesh::ModelSizeRequest request;
    request.set_modelid(id);
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      spi_->async()->modelSize(c, rq, rs, std::move(done));
    };
    return call<::mmesh::ModelSizeRequest, ::mmesh::ModelSizeResponse>(
               start, std::move(request), options_.metadata_deadline, id)
        .then([fallback](answer<::mmesh::ModelSizeResponse> a) -> std::uint64_t {
          return a.status.ok() && a.response.sizeinbytes() ? a.response.sizeinbytes() : fallback;
        });
  }

  // The model's inputs and outputs from V2 ModelMetadata; the load undone when they are missing
  // or unusable.
  kj::Promise<expected<load_outcome>> describe(const std::string& id, load_outcome outcome) {
    inference::ModelMetadataRequest request;
    request.set_name(id);
    auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
      v2_->async()->ModelMetadata(c, rq, rs, std::move(done));
    };
    return call<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
               start, std::move(request), options_.metadata_deadline, id)
        .then([this, id, outcome = kj::mv(outcome)](
                  answer<inference::ModelMetadataResponse> a) mutable -> expected<load_outcome> {
          if (!a.status.ok()) {
            unload_quietly(id);
            return error_from_status(a.status.error_code(), a.status.error_message(), id,
                                     "ModelMetadata failed after the load:", call_kind::load);
          }
          auto io = io_from_metadata(id, a.response);
          if (!io) {
            unload_quietly(id);
            return std::move(io).error();
          }
          outcome.io = std::move(*io);
          return std::move(outcome);
        });
  }

  void finish_load(LoadContext& context, const std::string& id,
                   const std::shared_ptr<model_entry>& entry, expected<load_outcome> outcome) {
    auto results = context.getResults();
    auto it = models_.find(id);
    const bool current = it != models_.end() && it->second == entry;
    if (!current) {  // unloaded meanwhile: whatever the runtime holds goes too
      if (outcome) unload_quietly(id);
      return write_error(make_error(errc::unavailable, id + " was unloaded while it loaded"),
                         results.initError());
    }
    if (!outcome) {
      models_.erase(it);
      return write_error(outcome.error(), results.initError());
    }
    entry->loaded = true;
    entry->bytes = outcome->bytes;
    entry->max_concurrency = outcome->max_concurrency;
    write_ok(results.initError());
    results.setBytes(outcome->bytes);
    results.setBatched(outcome->io.batched);
    const auto& io = outcome->io;
    auto inputs = results.initInputs(static_cast<unsigned>(io.inputs.size()));
    for (unsigned i = 0; i < io.inputs.size(); ++i)
      write_spec(io.inputs[i], inputs[i]);
    auto outputs = results.initOutputs(static_cast<unsigned>(io.outputs.size()));
    for (unsigned i = 0; i < io.outputs.size(); ++i)
      write_spec(io.outputs[i], outputs[i]);
  }

  // Why the runtime's models are gone, by this status answer (empty: they are not): it answered
  // STARTING or FAILING after READY (it restarted), or, when options_.end_on_reconnect, it is
  // reachable again after a status failed with UNAVAILABLE (it may have restarted meanwhile).
  // ModelMesh's interface cannot list what a runtime holds, so either way the bridge cannot know
  // which of its models are still there.
  std::string models_lost(const answer<status_response>& a) {
    const bool answered = a.status.ok();
    const bool ready = answered && a.response.status() == status_response::READY;
    std::string why;
    if (ready && unreachable_since_ready_)
      why = "it was unreachable and answers again, and may have restarted meanwhile";
    else if (answered && !ready && was_ready_)
      why = "it reports " + status_response::Status_Name(a.response.status()) +
            " after READY: it restarted";
    if (ready) was_ready_ = true, unreachable_since_ready_ = false;
    if (!answered && was_ready_ && options_.end_on_reconnect &&
        a.status.error_code() == grpc::StatusCode::UNAVAILABLE)
      unreachable_since_ready_ = true;
    return models_.empty() || ending_ ? std::string() : why;
  }

  // Ends the bridge after a runtime lost its models (`why`): every model it had loaded is unloaded
  // first (at most 2 s), in case the runtime kept it, and then the process exits with status 3.
  // warmd sees its runtime lost, counts every model on it lost, and starts the bridge again.
  kj::Promise<void> end_after_unloading(std::string why) {
    ending_ = true;
    std::cerr << "warm-mmesh: the runtime's models are gone (" << why << "); unloading the "
              << models_.size() << " it had and ending, for warmd to start afresh" << std::endl;
    auto unloads = kj::heapArrayBuilder<kj::Promise<void>>(models_.size());
    for (const auto& [id, entry] : models_) {
      entry->loading.cancel("the runtime lost its models");
      ::mmesh::UnloadModelRequest request;
      request.set_modelid(id);
      auto start = [this](auto* c, auto* rq, auto* rs, auto done) {
        spi_->async()->unloadModel(c, rq, rs, std::move(done));
      };
      unloads.add(call<::mmesh::UnloadModelRequest, ::mmesh::UnloadModelResponse>(
                      start, std::move(request), 2000ms, id)
                      .ignoreResult()
                      .catch_([](kj::Exception&&) {}));
    }
    return kj::joinPromises(unloads.finish()).then([] {
      std::cerr << "warm-mmesh: ended" << std::endl;
      std::_Exit(3);
    });
  }

  // Fills `out` from the runtime's answer (null: it did not answer): ready only when it answered
  // READY; without an answer the last known capacity and limits stay, so a moment's silence does
  // not make warmd evict.
  void write_status(const answer<status_response>* a, remote::RuntimeStatus::Builder out) {
    const bool answered = a && a->status.ok();
    if (answered) {
      const auto& r = a->response;
      capacity_ = std::min<std::uint64_t>(r.capacityinbytes(), max_capacity);
      loading_threads_ = std::clamp<std::uint32_t>(r.maxloadingconcurrency(), 1, 64);
      default_bytes_ = std::min<std::uint64_t>(r.defaultmodelsizeinbytes(), max_capacity);
      load_timeout_ms_ = r.modelloadingtimeoutms();
      limit_concurrency_ = r.limitmodelconcurrency();
      version_ = options_.version_prefix + bounded_text(r.runtimeversion(), max_version_bytes);
    }
    const bool ready = answered && a->response.status() == status_response::READY;
    std::string why;
    if (!a)
      why = "no answer";
    else if (!a->status.ok())
      why = std::string(status_code_name(a->status.error_code())) + ": " +
            bounded_text(a->status.error_message(), 200);
    else if (!ready)
      why = "it reports " + status_response::Status_Name(a->response.status());
    if (why != last_why_) {  // said once per change, for operators
      std::cerr << "warm-mmesh: the runtime is "
                << (ready ? std::string("ready") : "not ready (" + why + ")") << std::endl;
      last_why_ = why;
    }
    std::uint64_t rss = options_.rss ? options_.rss() : 0;
    if (ready && !base_rss_) base_rss_ = rss;
    out.setReady(ready);
    out.setCapacityBytes(capacity_);
    out.setLoadingThreads(loading_threads_);
    out.setDefaultModelBytes(default_bytes_);
    out.setVersion(version_);
    out.setRssBytes(rss);
    out.setBaseRssBytes(base_rss_);
    auto kinds = out.initKinds(static_cast<unsigned>(options_.kinds.size()));
    for (unsigned i = 0; i < options_.kinds.size(); ++i)
      kinds.set(i, options_.kinds[i]);
    std::uint64_t used = 0;
    auto loaded = out.initLoaded(static_cast<unsigned>(models_.size()));
    unsigned i = 0;
    for (const auto& [id, entry] : models_) {
      loaded.set(i++, id);
      used += entry->bytes;
    }
    out.setUsedBytes(used);
  }

  bridge_options options_;
  std::unique_ptr<::mmesh::ModelRuntime::Stub> spi_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> v2_;
  std::map<std::string, std::shared_ptr<model_entry>> models_;
  // From the runtime's last status answer.
  std::uint64_t capacity_ = 0;
  std::uint32_t loading_threads_ = 1;
  std::uint64_t default_bytes_ = 0;
  std::uint32_t load_timeout_ms_ = 0;  // 0: none (warmd's own load timeout applies)
  bool limit_concurrency_ = false;
  std::string version_ = options_.version_prefix + "(not answered yet)";
  std::uint64_t base_rss_ = 0;            // at its first READY
  bool ending_ = false;                   // end_after_unloading has begun
  bool was_ready_ = false;                // it answered READY at least once
  bool unreachable_since_ready_ = false;  // a status failed with UNAVAILABLE since then
  std::string last_why_ = "(never)";
};

}  // namespace

kj::Own<remote::ModelRuntime::Server> make_bridge(std::shared_ptr<grpc::Channel> channel,
                                                  bridge_options options) {
  return kj::heap<bridge>(std::move(channel), std::move(options));
}

}  // namespace warm::mmesh
