// Dynamic batching: requests for one model that arrive together share a pass over its weights.
//
// Each model served with batching has a queue. A request joins it with its lease (checked inputs
// only); while the queue is not empty a drain task runs on the runtime's inference threads: it
// asks batch_plan which requests to run next, runs them as one inference of all their rows, and
// answers each with its own rows. While more than one batch is queued, another drain starts, up
// to one per inference thread, so a backlog is served by every core. With max_queue_delay 0 the drain never waits: a burst
// (the waiters of a cold start, answered together) is served in passes of up to max_batch rows.
// Past max_queue queued requests a request is refused at once with `unavailable`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/batch_plan.hpp"
#include "runtime/executor.hpp"
#include "warm/caf/messages.hpp"
#include "warm/metrics.hpp"
#include "warm/runtime_types.hpp"

namespace warm {

class batcher {
 public:
  // `work` runs the drains and must outlive the batcher's last drain (the runtime destroys the
  // executor, which runs what is queued, before the batcher).
  batcher(batching_options options, executor& work, runtime_metrics& metrics);

  // Queues `request` (inputs checked: `rows` rows for the leased model) to run on `held`'s lease.
  // `done` is called once: with the request's own rows, or an error (the pass failed, or the
  // queue was full: unavailable, at once, on this thread).
  void submit(std::shared_ptr<msg::acquired> held, infer_request request, std::uint64_t rows,
              callback<infer_result> done);

  const batching_options& options() const { return options_; }

 private:
  struct item {
    std::shared_ptr<msg::acquired> held;
    infer_request request;
    std::uint64_t rows = 0;
    callback<infer_result> done;
    std::chrono::steady_clock::time_point queued;
  };
  struct queue {
    std::mutex mutex;
    std::condition_variable more;  // a request arrived while the drain waited for the delay
    std::deque<item> items;
    unsigned drains = 0;  // drain tasks running: one, or more while a backlog lasts (at most one a thread)
  };

  std::shared_ptr<queue> queue_of(const std::string& model);
  void drain(const std::shared_ptr<queue>& q);
  void run(std::deque<item>& batch);

  batching_options options_;
  executor& work_;
  runtime_metrics& metrics_;
  std::mutex queues_mutex_;
  std::unordered_map<std::string, std::shared_ptr<queue>> queues_;  // one per model ever batched
};

}  // namespace warm
