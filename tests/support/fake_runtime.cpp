#include "support/fake_runtime.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "runtime.capnp.h"

namespace warm::test {
namespace {

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void write_spec(remote::TensorSpec::Builder spec, const char* name, std::int64_t width) {
  spec.setName(name);
  spec.setDtype("F32");
  auto shape = spec.initShape(2);
  shape.set(0, -1);
  shape.set(1, width);
}

void write_ok(remote::Error::Builder error) {
  error.setCode(remote::Error::Code::OK);
}

}  // namespace

// The capability; lives on the fake's thread, as does everything it keeps.
class fake_runtime::server final : public remote::ModelRuntime::Server {
 public:
  server(fake_runtime& fake, kj::Timer& timer) : fake_(fake), timer_(timer) {}

 protected:
  kj::Promise<void> status(StatusContext context) override {
    ++fake_.statuses;
    auto s = context.getResults().initStatus();
    s.setReady(true);
    s.setCapacityBytes(fake_.capacity);
    s.setLoadingThreads(fake_.loading_threads);
    s.setVersion("fake-runtime");
    s.initKinds(1).set(0, "dense");
    std::uint64_t orphans = fake_.orphans, held_bytes = 0;
    auto loaded = s.initLoaded(static_cast<unsigned>(orphans + models_.size()));
    unsigned i = 0;
    for (auto& [id, bytes] : models_) {
      loaded.set(i++, id);
      held_bytes = saturating_add(held_bytes, bytes);
    }
    for (std::uint64_t n = 0; n < orphans; ++n)
      loaded.set(i++, "orphan#" + std::to_string(n));
    if (fake_.measure_rss) {
      s.setBaseRssBytes(fake_.base_rss);
      s.setRssBytes(saturating_add(saturating_add(fake_.base_rss, held_bytes), fake_.extra_rss));
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> predictSize(PredictSizeContext context) override {
    write_ok(context.getResults().initError());  // bytes 0: no prediction
    return kj::READY_NOW;
  }

  kj::Promise<void> load(LoadContext context) override {
    ++fake_.loads;
    std::string id = context.getParams().getModelId();
    std::uint64_t bytes = fake_.measured;
    models_[id] = bytes;
    fake_.held = models_.size();
    auto results = context.getResults();
    write_ok(results.initError());
    results.setBytes(bytes);
    results.setBatched(true);
    write_spec(results.initInputs(1)[0], "input", 16);
    write_spec(results.initOutputs(1)[0], "output", 8);
    return kj::READY_NOW;
  }

  kj::Promise<void> unload(UnloadContext context) override {
    ++fake_.unloads;
    auto now = ++fake_.unloads_at_once;
    auto most = fake_.most_unloads_at_once.load();
    while (now > most && !fake_.most_unloads_at_once.compare_exchange_weak(most, now)) {
    }
    std::string id = context.getParams().getModelId();
    auto answer = [this, id, context]() mutable {
      --fake_.unloads_at_once;
      models_.erase(id);
      fake_.held = models_.size();
      write_ok(context.getResults().initError());
    };
    std::uint32_t delay = fake_.unload_delay_ms;
    if (delay == 0) {
      answer();
      return kj::READY_NOW;
    }
    return timer_.afterDelay(delay * kj::MILLISECONDS).then(kj::mv(answer));
  }

  kj::Promise<void> infer(InferContext context) override {
    ++fake_.inferences;
    auto batch = context.getParams().getBatch();
    auto results = context.getResults();
    write_ok(results.initError());
    auto output = results.initOutputs(1)[0];
    output.setName("output");
    switch (fake_.infer_answer.load()) {
      case answer::correct:
      case answer::extra_row: {
        auto rows = fake_.infer_answer == answer::correct ? batch : batch + 1;
        output.setDtype("F32");
        auto shape = output.initShape(2);
        shape.set(0, rows);
        shape.set(1, 8);
        output.initData(static_cast<unsigned>(rows * 8 * 4));
        break;
      }
      case answer::overflowing:
        output.setDtype("F64");
        output.initShape(1).set(0, std::uint64_t{1} << 61);
        break;
    }
    return kj::READY_NOW;
  }

 private:
  fake_runtime& fake_;
  kj::Timer& timer_;
  std::map<std::string, std::uint64_t> models_;  // id → bytes
};

struct fake_runtime::thread_state {
  std::mutex mutex;
  std::condition_variable changed;
  bool listening = false;
  std::string failure;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop;
  std::thread thread;
};

fake_runtime::fake_runtime(std::string socket)
    : socket_(std::move(socket)), thread_(std::make_unique<thread_state>()) {
  auto* t = thread_.get();
  t->thread = std::thread([this, t] {
    try {
      auto io = kj::setupAsyncIo();
      auto address = io.provider->getNetwork()
                         .parseAddress(kj::str("unix:", socket_.c_str()))
                         .wait(io.waitScope);
      auto listener = address->listen();
      capnp::TwoPartyServer serving(kj::heap<server>(*this, io.provider->getTimer()));
      auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
      {
        std::lock_guard<std::mutex> lock(t->mutex);
        t->stop = kj::mv(stop.fulfiller);
        t->listening = true;
      }
      t->changed.notify_all();
      serving.listen(*listener).exclusiveJoin(kj::mv(stop.promise)).wait(io.waitScope);
    } catch (const kj::Exception& e) {
      std::lock_guard<std::mutex> lock(t->mutex);
      t->failure = e.getDescription().cStr();
    }
    t->changed.notify_all();
  });
  std::unique_lock<std::mutex> lock(t->mutex);
  t->changed.wait(lock, [&] { return t->listening || !t->failure.empty(); });
  if (!t->listening) {
    lock.unlock();
    t->thread.join();
    throw std::runtime_error("fake runtime on " + socket_ + ": " + t->failure);
  }
}

fake_runtime::~fake_runtime() {
  {
    std::lock_guard<std::mutex> lock(thread_->mutex);
    if (thread_->stop) thread_->stop->fulfill();
  }
  thread_->thread.join();
}

}  // namespace warm::test
