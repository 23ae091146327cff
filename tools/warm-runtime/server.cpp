// GCC 12 warns that the std::variant inside warm::expected, carried through kj promises in a
// kj::Maybe, "may be used uninitialized": a false positive (the Maybe is engaged when read). The
// warning points into the standard headers, so this comes before them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "server.hpp"

#include <kj/async.h>

#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "remote/tensors.hpp"
#include "rss_meter.hpp"
#include "runtime/executor.hpp"
#include "warm/backend.hpp"
#include "warm/units.hpp"

namespace warm {
namespace {

// Runs `work` on `pool` and resolves with its result on the calling event loop.
template <typename T>
kj::Promise<T> on_worker(executor& pool, std::function<T()> work) {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<T>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<T>>>(kj::mv(paf.fulfiller));
  pool.submit([fulfiller, work = std::move(work)]() mutable { (*fulfiller)->fulfill(work()); });
  return kj::mv(paf.promise);
}

using model_ptr = std::shared_ptr<const resident_model>;

// A call into model code on this thread, watched until it is destroyed; none when calls are not
// watched (`watch` null).
std::optional<call_watch::call> watched(call_watch* watch, const std::string& model,
                                        const char* what) {
  if (!watch) return std::nullopt;
  return watch->begin(model, what);
}

class runtime_server final : public remote::ModelRuntime::Server {
 public:
  explicit runtime_server(const runtime_server_options& o)
      : options_(o),
        inference_(o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency())),
        loading_(std::max(1u, o.loading_threads)),
        describing_(1),
        rss_(o.statm_fd, o.rss_period) {
    device_spec spec;
    spec.capacity = o.capacity;
    auto dev = make_device(spec);
    if (!dev) throw std::runtime_error(dev.error().message);
    dev_ = std::move(*dev);
    if (o.on_runaway) watch_ = std::make_unique<call_watch>(o.limits, o.on_runaway);
  }

 private:
  // Why a file may not be loaded here: its root is not one of the runtime's repositories (the
  // file itself is then opened beneath that root, as warmd does). Nothing when it may.
  std::optional<error> outside(const model_location& where) const {
    for (const auto& root : options_.repositories)
      if (!where.root.empty() && where.root == root) return std::nullopt;
    return make_error(
        errc::invalid_argument,
        where.path + ": not in a repository this runtime serves (" +
            (options_.repositories.empty() ? std::string("it serves none: --repo") : "--repo") +
            ")");
  }

 protected:
  kj::Promise<void> status(StatusContext context) override {
    auto s = context.getResults().initStatus();
    s.setReady(true);
    s.setCapacityBytes(reported_capacity());
    s.setUsedBytes(dev_->used());
    s.setRssBytes(rss_.take_peak());
    s.setBaseRssBytes(rss_.base());
    s.setLoadingThreads(std::max(1u, options_.loading_threads));
    s.setVersion("warm-runtime 0.1.0");
    auto kinds = backend_kinds();
    auto list = s.initKinds(static_cast<unsigned>(kinds.size()));
    for (unsigned i = 0; i < kinds.size(); ++i)
      list.set(i, kinds[i]);
    std::lock_guard<std::mutex> lock(mutex_);
    auto loaded = s.initLoaded(static_cast<unsigned>(models_.size()));
    unsigned i = 0;
    for (auto& [id, entry] : models_)
      loaded.set(i++, id);
    return kj::READY_NOW;
  }

  kj::Promise<void> predictSize(PredictSizeContext context) override {
    auto where = read_model_file(context.getParams().getFile());
    if (auto refused = outside(where)) {
      write_error(*refused, context.getResults().initError());
      return kj::READY_NOW;
    }
    return on_worker<expected<std::uint64_t>>(
               describing_,
               [where, watch = watch_.get()]() -> expected<std::uint64_t> {
                 auto watching = watched(watch, where.path, "size prediction");
                 auto described = describe_model(where);
                 if (!described) return std::move(described).error();
                 return described->predicted_bytes;
               })
        .then([context](expected<std::uint64_t> bytes) mutable {
          auto results = context.getResults();
          if (!bytes) return write_error(bytes.error(), results.initError());
          write_ok(results.initError());
          results.setBytes(*bytes);
        });
  }

  kj::Promise<void> load(LoadContext context) override {
    auto params = context.getParams();
    std::string id = params.getModelId();
    auto where = read_model_file(params.getFile());
    if (auto refused = outside(where)) {
      write_error(*refused, context.getResults().initError());
      return kj::READY_NOW;
    }
    auto reserved = params.getReservedBytes();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (models_.count(id)) {
        write_error(make_error(errc::invalid_argument, id + " is already loaded"),
                    context.getResults().initError());
        return kj::READY_NOW;
      }
      models_[id] = entry{};  // loading
    }
    auto& dev = *dev_;
    return on_worker<expected<std::unique_ptr<resident_model>>>(
               loading_,
               [&dev, where, reserved, watch = watch_.get(), id]() {
                 auto watching = watched(watch, id, "load");
                 return load_here(dev, where, reserved);
               })
        .then([this, context, id](expected<std::unique_ptr<resident_model>> model) mutable {
          auto results = context.getResults();
          std::unique_lock<std::mutex> lock(mutex_);
          auto it = models_.find(id);
          if (it == models_.end() || it->second.cancelled) {  // unloaded while it loaded
            if (it != models_.end()) models_.erase(it);
            lock.unlock();
            return write_error(make_error(errc::unavailable, id + " was unloaded while it loaded"),
                               results.initError());
          }
          if (!model) {
            models_.erase(it);
            return write_error(model.error(), results.initError());
          }
          it->second.model = model_ptr(std::move(*model));
          auto& m = *it->second.model;
          write_ok(results.initError());
          results.setBytes(m.bytes());
          results.setBatched(m.io().batched);
          auto inputs = results.initInputs(static_cast<unsigned>(m.io().inputs.size()));
          for (unsigned i = 0; i < m.io().inputs.size(); ++i)
            write_spec(m.io().inputs[i], inputs[i]);
          auto outputs = results.initOutputs(static_cast<unsigned>(m.io().outputs.size()));
          for (unsigned i = 0; i < m.io().outputs.size(); ++i)
            write_spec(m.io().outputs[i], outputs[i]);
        });
  }

  kj::Promise<void> unload(UnloadContext context) override {
    std::string id = context.getParams().getModelId();
    model_ptr dropped;  // freed after the lock, once inferences holding it end
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = models_.find(id);
      if (it == models_.end()) {
        write_error(make_error(errc::not_found, id + " is not loaded"),
                    context.getResults().initError());
        return kj::READY_NOW;
      }
      if (!it->second.model) {
        it->second.cancelled = true;  // the load drops it when it finishes
      } else {
        dropped = std::move(it->second.model);
        models_.erase(it);
      }
    }
    dropped.reset();      // freed now unless an inference still holds it
    rss_.restart_peak();  // so the next status does not report it held
    write_ok(context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> infer(InferContext context) override {
    auto params = context.getParams();
    std::string id = params.getModelId();
    model_ptr model;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = models_.find(id);
      if (it != models_.end()) model = it->second.model;
    }
    if (!model) {
      write_error(make_error(errc::not_found, id + " is not loaded"),
                  context.getResults().initError());
      return kj::READY_NOW;
    }
    auto inputs = read_tensors(params.getInputs());
    if (!inputs) {
      write_error(inputs.error(), context.getResults().initError());
      return kj::READY_NOW;
    }
    auto batch = params.getBatch();
    auto work = [model, inputs = std::move(*inputs), batch, watch = watch_.get(),
                 id]() mutable -> expected<std::vector<tensor>> {
      auto watching = watched(watch, id, "inference");
      // warmd checked the inputs; another client may not have.
      auto checked = check_inputs(inputs, model->io(), model->max_batch());
      if (!checked) return std::move(checked).error();
      if (model->io().batched && *checked != batch)
        return make_error(errc::invalid_argument, "the inputs hold " + std::to_string(*checked) +
                                                      " rows, not " + std::to_string(batch));
      return model->run(inputs, *checked);
    };
    return on_worker<expected<std::vector<tensor>>>(inference_, std::move(work))
        .then([context](expected<std::vector<tensor>> outputs) mutable {
          write_infer_answer(outputs, context.getResults());
        });
  }

 private:
  // The capacity file's size when it holds one, else the device's capacity (never more).
  std::uint64_t reported_capacity() const {
    if (options_.capacity_file.empty()) return dev_->capacity();
    std::ifstream in(options_.capacity_file);
    std::string text;
    std::getline(in, text);
    auto bytes = parse_bytes(text);
    return bytes ? std::min(*bytes, dev_->capacity()) : dev_->capacity();
  }

  struct entry {
    model_ptr model;         // null while it loads
    bool cancelled = false;  // unloaded while it loads
  };

  // A load on this runtime's device, charged as warmd's loader pool charges it: the reservation
  // (or the backend's prediction), then the measured size, all or nothing.
  static expected<std::unique_ptr<resident_model>> load_here(device& dev,
                                                             const model_location& where,
                                                             std::uint64_t reserved) {
    auto backend = find_backend(where.kind);
    if (!backend) return make_error(errc::invalid_argument, backend.error().message);
    if (reserved == 0) {
      auto described = (*backend)->describe(where);
      if (!described) return std::move(described).error();
      reserved = described->predicted_bytes;
    }
    auto reservation = dev.reserve(reserved);
    if (!reservation) return std::move(reservation).error();
    load_stats stats;
    auto model = (*backend)->load(dev, where, std::move(*reservation), &stats);
    if (!model) return model;
    if (auto more = (*model)->shortfall()) {
      auto extra = dev.reserve(more);
      if (!extra)
        return make_error(extra.error().code, where.path + " takes " +
                                                  format_bytes((*model)->measured_bytes()) +
                                                  " once loaded: " + extra.error().message);
      (*model)->settle(std::move(*extra));
    } else {
      (*model)->settle({});
    }
    return model;
  }

  runtime_server_options options_;
  std::unique_ptr<device> dev_;
  // Null: calls are not watched. Before the executors: destroyed after them, once no call runs.
  std::unique_ptr<call_watch> watch_;
  executor inference_;
  executor loading_;
  executor describing_;  // predictSize reads files apart from loads, so it never queues behind one
  rss_meter rss_;
  std::mutex mutex_;
  std::map<std::string, entry> models_;
};

}  // namespace

kj::Own<remote::ModelRuntime::Server> make_runtime_server(const runtime_server_options& options) {
  return kj::heap<runtime_server>(options);
}

}  // namespace warm
