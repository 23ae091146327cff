// Dynamic batching: requests for one model that arrive together share a pass over its weights.
//
// Each model with a request queued has a queue. A request joins it with its lease (checked inputs
// only). Whenever batch_plan says the queue holds a batch to run now, a drain task runs on the
// runtime's inference threads: it runs that batch as one inference of all its rows, answers each
// request with its own rows, and goes on while batches are ready (behind any other task waiting
// for the threads: it submits itself again rather than hold its thread from them). While more than
// one batch is queued, another drain starts, up to one per inference thread, so a backlog is served
// by every core. Without a delay, while several drains serve a model, each takes a fair share of
// its work (batch_plan's fair_share): one drain does not take everything that arrived while the
// others ran. A batch that waits for more requests (max_queue_delay) waits on the batcher's timer
// thread, never on an inference thread: when the delay ends, the timer starts a drain.
//
// Each model is batched with the runtime's default options or the options its registration set
// (set_model_options): such a model's every inference goes through submit. A model with neither
// (the runtime's off, its registration silent) is batched automatically when `automatic` > 1: the
// inferences that go to the inference threads anyway (the waiters of a cold load, hits too heavy
// for the caller's thread) are queued, in passes of up to `automatic` rows with no delay and a
// bound that refuses nothing the threads would have taken; hits the caller runs itself are not.
// Past max_queue queued requests a request is refused at once with `unavailable`. A queue that
// empties is dropped, so queues exist only for models in use.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/batch_plan.hpp"
#include "core/lease.hpp"
#include "runtime/executor.hpp"
#include "warm/metrics.hpp"
#include "warm/runtime_types.hpp"

namespace warm {

class batcher {
 public:
  // `defaults` batch every model without options of its own. `work` runs the drains and must
  // outlive the batcher's last drain: call stop(), then destroy `work` (which runs what is
  // queued), then the batcher. Destroyed without stop(), requests still queued are dropped
  // unanswered (their callbacks destroyed).
  batcher(batching_options defaults, std::uint64_t automatic, executor& work,
          runtime_metrics& metrics);
  ~batcher();
  batcher(const batcher&) = delete;
  batcher& operator=(const batcher&) = delete;

  // Whether every inference of `model` goes through submit, a hit the caller could run included:
  // the runtime's options or its own batch it. Lock-free while no model is so batched.
  bool batches(const std::string& model) const;
  // Whether `model`'s inferences bound for the inference threads go through submit: batches(), or
  // automatic batching covers it.
  bool batches_queued(const std::string& model) const;

  // The options of a model batched automatically.
  static batching_options automatic_options(std::uint64_t max_batch);

  // Queues `request` (inputs checked: `rows` rows for the leased model) to run on `held`'s lease.
  // `done` is called once: with the request's own rows, or an error (the pass failed, or the
  // queue was full: unavailable, at once, on this thread).
  void submit(std::shared_ptr<acquired> held, infer_request request, std::uint64_t rows,
              callback<infer_result> done);

  // Batches `model` with `options` from now on (checked by the caller), or with the defaults
  // again when empty. Requests already queued are planned with the new options.
  void set_model_options(const std::string& model, std::optional<batching_options> options);

  // For shutdown: stops the timer and starts a drain of every queue that waits for its delay, so
  // every queued request is answered once `work` has run what it holds.
  void stop();

 private:
  using time_point = std::chrono::steady_clock::time_point;
  struct item {
    std::shared_ptr<acquired> held;
    infer_request request;
    std::uint64_t rows = 0;
    callback<infer_result> done;
    time_point queued;
  };
  struct queue {
    std::string model;
    std::mutex mutex;
    batching_options options;
    std::deque<item> items;
    std::uint64_t queued_rows = 0;    // the rows of `items`
    std::uint64_t running_rows = 0;   // rows the drains took and have not answered yet
    unsigned drains = 0;              // drain tasks running: at most one an inference thread
    std::optional<time_point> armed;  // the timer's deadline for this queue, if one is set
    bool retired = false;             // dropped from queues_: submit must look again
  };

  std::shared_ptr<queue> queue_of(const std::string& model);
  // The options `model` is batched with: its own, the defaults, or the automatic ones (disabled
  // when none batch it); queues_mutex_ held.
  const batching_options& options_of(const std::string& model) const;
  // How many of q's requests run now (batch_plan); q.mutex held.
  std::size_t ready(const queue& q, time_point now) const;
  // Makes the timer start a drain of `q` at `deadline` (or sooner); q.mutex held. False once the
  // timer has stopped: the caller must not leave `q` waiting.
  bool arm(const std::shared_ptr<queue>& q, time_point deadline);
  void drain(const std::shared_ptr<queue>& q);
  // Drops `q` from queues_ if it is still empty and idle; `lock` holds q.mutex, and holds it again
  // on return.
  void retire_if_idle(const std::shared_ptr<queue>& q, std::unique_lock<std::mutex>& lock);
  void run(std::deque<item>& batch);
  void timer_loop();
  // Stops the timer thread; returns the queues it was to wake.
  std::multimap<time_point, std::shared_ptr<queue>> stop_timer();

  const batching_options defaults_;
  const batching_options automatic_;  // enabled() when automatic batching is on
  executor& work_;
  runtime_metrics& metrics_;

  mutable std::shared_mutex queues_mutex_;  // before any queue's mutex, when both are held
  std::unordered_map<std::string, std::shared_ptr<queue>> queues_;  // models with requests queued
  std::unordered_map<std::string, batching_options> overrides_;     // per-model options
  std::size_t batched_overrides_ = 0;                               // overrides that batch
  std::atomic<bool> any_batched_{false};  // the defaults batch, or an override does

  std::mutex timer_mutex_;  // after a queue's mutex, when both are held
  std::condition_variable timer_wake_;
  std::multimap<time_point, std::shared_ptr<queue>> deadlines_;
  bool stopping_ = false;              // guarded by timer_mutex_
  std::atomic<bool> flushing_{false};  // stop() was called: nothing waits for its delay
  std::thread timer_;
};

}  // namespace warm
