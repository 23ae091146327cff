#include "runtime/batcher.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/checked_outputs.hpp"

namespace warm {

batching_options batcher::automatic_options(std::uint64_t max_batch) {
  batching_options o;
  o.max_batch = max_batch;
  o.max_queue = max_queue_limit;  // the inference threads' own queue refuses nothing
  return o;
}

batcher::batcher(batching_options defaults, std::uint64_t automatic, executor& work,
                 runtime_metrics& metrics)
    : defaults_(std::move(defaults)),
      automatic_(automatic_options(automatic)),
      work_(work),
      metrics_(metrics),
      any_batched_(defaults_.enabled()) {
  timer_ = std::thread([this] { timer_loop(); });
}

batcher::~batcher() {
  stop_timer();
}

bool batcher::batches(const std::string& model) const {
  if (!any_batched_.load(std::memory_order_acquire)) return false;
  std::shared_lock<std::shared_mutex> lock(queues_mutex_);
  auto it = overrides_.find(model);
  return (it == overrides_.end() ? defaults_ : it->second).enabled();
}

bool batcher::batches_queued(const std::string& model) const {
  if (!any_batched_.load(std::memory_order_acquire) && !automatic_.enabled()) return false;
  std::shared_lock<std::shared_mutex> lock(queues_mutex_);
  return options_of(model).enabled();
}

const batching_options& batcher::options_of(const std::string& model) const {
  if (auto it = overrides_.find(model); it != overrides_.end()) return it->second;
  return defaults_.enabled() ? defaults_ : automatic_;
}

void batcher::set_model_options(const std::string& model, std::optional<batching_options> options) {
  std::lock_guard<std::shared_mutex> lock(queues_mutex_);
  if (auto it = overrides_.find(model); it != overrides_.end()) {
    batched_overrides_ -= it->second.enabled();
    overrides_.erase(it);
  }
  if (options) {
    batched_overrides_ += options->enabled();
    overrides_.emplace(model, std::move(*options));
  }
  any_batched_.store(defaults_.enabled() || batched_overrides_ > 0, std::memory_order_release);
  if (auto it = queues_.find(model); it != queues_.end()) {
    std::lock_guard<std::mutex> queue_lock(it->second->mutex);
    it->second->options = options_of(model);
  }
}

std::shared_ptr<batcher::queue> batcher::queue_of(const std::string& model) {
  {
    // Most requests find their model's queue: readers do not wait for one another.
    std::shared_lock<std::shared_mutex> lock(queues_mutex_);
    if (auto it = queues_.find(model); it != queues_.end()) return it->second;
  }
  std::lock_guard<std::shared_mutex> lock(queues_mutex_);
  auto& q = queues_[model];
  if (!q) {
    q = std::make_shared<queue>();
    q->model = model;
    q->options = options_of(model);
  }
  return q;
}

std::size_t batcher::ready(const queue& q, time_point now) const {
  // Each request has a row at least, so max_batch + 1 of them decide the next pass.
  thread_local std::vector<std::uint64_t> rows;
  rows.clear();
  for (const auto& i : q.items) {
    if (rows.size() > q.options.max_batch) break;
    rows.push_back(i.rows);
  }
  auto waited =
      flushing_.load(std::memory_order_relaxed)
          ? std::chrono::microseconds::max()
          : std::chrono::duration_cast<std::chrono::microseconds>(now - q.items.front().queued);
  return requests_to_run(rows, waited, q.options);
}

bool batcher::arm(const std::shared_ptr<queue>& q, time_point deadline) {
  if (q->armed && *q->armed <= deadline) return true;  // the timer comes then, or sooner
  {
    std::lock_guard<std::mutex> lock(timer_mutex_);
    if (stopping_) return false;
    deadlines_.emplace(deadline, q);
  }
  q->armed = deadline;
  timer_wake_.notify_one();
  return true;
}

void batcher::submit(std::shared_ptr<acquired> held, infer_request request, std::uint64_t rows,
                     callback<infer_result> done) {
  for (;;) {
    auto q = queue_of(held->model);
    std::unique_lock<std::mutex> lock(q->mutex);
    if (q->retired) continue;  // emptied and dropped since the lookup: a new queue serves
    if (q->items.size() >= q->options.max_queue) {
      const auto bound = q->options.max_queue;
      lock.unlock();
      auto model = std::move(held->model);
      held->lease.reset();  // given back before the answer
      held = nullptr;
      return done(make_error(errc::unavailable, "the batch queue of model '" + model +
                                                    "' is full (" + std::to_string(bound) +
                                                    " requests)"));
    }
    const auto now = std::chrono::steady_clock::now();
    q->items.push_back(item{std::move(held), std::move(request), rows, std::move(done), now});
    q->queued_rows += rows;
    // Like a model instance that is free: a thread not running this model's passes starts a pass
    // now, when the plan says one is ready (a running drain plans again before it ends).
    if (q->drains >= work_.threads()) return;
    if (ready(*q, now) == 0) {
      if (q->drains > 0 || arm(q, q->items.front().queued + q->options.max_queue_delay)) return;
    }
    ++q->drains;
    lock.unlock();
    work_.submit([this, q] { drain(q); });
    return;
  }
}

void batcher::drain(const std::shared_ptr<queue>& shared) {
  auto& q = *shared;
  std::unique_lock<std::mutex> lock(q.mutex);
  for (;;) {
    if (q.items.empty()) {
      if (--q.drains == 0) retire_if_idle(shared, lock);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    auto n = ready(q, now);
    if (n == 0) {  // the timer starts a drain when the oldest has waited the delay
      if (arm(shared, q.items.front().queued + q.options.max_queue_delay)) {
        --q.drains;
        return;
      }
      n = ready(q, now);  // stopping: nothing waits any more
    }
    thread_local std::vector<std::uint64_t> rows;
    rows.clear();
    for (std::size_t k = 0; k < n; ++k)
      rows.push_back(q.items[k].rows);
    n = fair_share(rows, n, q.queued_rows, q.running_rows, q.drains, q.options);
    std::deque<item> batch;
    std::uint64_t taken = 0;
    for (std::size_t k = 0; k < n; ++k) {
      taken += q.items.front().rows;
      batch.push_back(std::move(q.items.front()));
      q.items.pop_front();
    }
    q.queued_rows -= taken;
    q.running_rows += taken;
    // A backlog past this batch: another drain serves it on another thread meanwhile.
    const bool help = !q.items.empty() && q.drains < work_.threads() && ready(q, now) > 0;
    if (help) ++q.drains;
    lock.unlock();
    if (help) work_.submit([this, shared] { drain(shared); });
    for (const auto& i : batch)
      metrics_.batch_queue_delay.observe(std::chrono::duration<double>(now - i.queued).count());
    run(batch);
    lock.lock();
    q.running_rows -= taken;
    // While other work waits for the threads (another model's passes or inferences), this
    // model's next pass waits its turn behind it: a steady backlog does not hold a thread.
    if (!q.items.empty() && work_.others_waiting()) {
      lock.unlock();
      work_.submit([this, shared] { drain(shared); });
      return;
    }
  }
}

void batcher::retire_if_idle(const std::shared_ptr<queue>& q, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  {
    std::lock_guard<std::shared_mutex> queues_lock(queues_mutex_);
    lock.lock();
    if (!q->items.empty() || q->drains > 0 || q->retired) return;
    q->retired = true;
    if (auto it = queues_.find(q->model); it != queues_.end() && it->second == q) queues_.erase(it);
  }
}

void batcher::timer_loop() {
  std::unique_lock<std::mutex> lock(timer_mutex_);
  for (;;) {
    if (stopping_) return;
    if (deadlines_.empty()) {
      timer_wake_.wait(lock);
      continue;
    }
    const auto first = deadlines_.begin()->first;
    if (std::chrono::steady_clock::now() < first) {
      timer_wake_.wait_until(lock, first);
      continue;
    }
    auto q = std::move(deadlines_.begin()->second);
    deadlines_.erase(deadlines_.begin());
    lock.unlock();
    {
      std::lock_guard<std::mutex> queue_lock(q->mutex);
      if (q->armed == first) q->armed.reset();
      if (q->drains == 0 && !q->items.empty() && !q->retired) {
        q->drains = 1;
        work_.submit([this, q] { drain(q); });
      }
    }
    lock.lock();
  }
}

std::multimap<batcher::time_point, std::shared_ptr<batcher::queue>> batcher::stop_timer() {
  std::multimap<time_point, std::shared_ptr<queue>> waiting;
  {
    std::lock_guard<std::mutex> lock(timer_mutex_);
    if (stopping_) return waiting;
    stopping_ = true;
    waiting.swap(deadlines_);
  }
  timer_wake_.notify_one();
  timer_.join();
  return waiting;
}

void batcher::stop() {
  // Set first: a plan made from now on runs what is queued, so no queue is armed after the timer
  // stops (arm refuses then, and its caller plans again).
  flushing_.store(true);
  auto waiting = stop_timer();
  for (auto& [deadline, q] : waiting) {
    std::lock_guard<std::mutex> lock(q->mutex);
    q->armed.reset();
    if (q->drains == 0 && !q->items.empty() && !q->retired) {
      q->drains = 1;
      work_.submit([this, q = q] { drain(q); });
    }
  }
}

namespace {

// Whether two checked requests' inputs can be joined row by row: the same types and the same
// dimensions past the first (a model with dynamic inner dimensions may be sent different ones).
bool joinable(const infer_request& a, const infer_request& b) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    const auto &x = a.inputs[i], &y = b.inputs[i];
    if (x.type != y.type || x.shape.size() != y.shape.size() || x.shape.empty() ||
        !std::equal(x.shape.begin() + 1, x.shape.end(), y.shape.begin() + 1))
      return false;
  }
  return true;
}

}  // namespace

// Runs `batch` in passes, one per run of requests leased on the same slot (a reload between two
// requests gives them different weights) whose inputs can be joined, within the model's largest
// batch, and answers each request with its rows. A pass joins each input's rows in request order
// (every input's first dimension is the batch: the model's io is batched) and splits each output's
// rows back the same way.
void batcher::run(std::deque<item>& batch) {
  while (!batch.empty()) {
    auto& lease = batch.front().held->lease;
    // Each request is within the model's largest batch (checked when it was queued); so is a pass.
    const auto limit = lease.model().max_batch();
    std::size_t n = 1;
    std::uint64_t rows = batch.front().rows;
    while (n < batch.size() && &batch[n].held->lease.slot() == &lease.slot() &&
           batch[n].rows <= limit - rows && joinable(batch.front().request, batch[n].request))
      rows += batch[n++].rows;

    expected<std::vector<tensor>> ran = std::vector<tensor>{};
    if (n == 1) {
      ran = lease.model().run(batch.front().request.inputs, rows);
    } else {
      std::vector<tensor> joined = batch.front().request.inputs;  // names, dtypes, inner dims
      for (std::size_t i = 0; i < joined.size(); ++i) {
        auto& in = joined[i];
        in.shape.front() = rows;
        std::size_t bytes = 0;
        for (std::size_t k = 0; k < n; ++k)
          bytes += batch[k].request.inputs[i].data.size();
        in.data.resize(bytes);
        auto* at = in.data.data();
        for (std::size_t k = 0; k < n; ++k) {
          const auto& data = batch[k].request.inputs[i].data;
          std::memcpy(at, data.data(), data.size());
          at += data.size();
        }
      }
      ran = lease.model().run(joined, rows);
    }
    // What the model declares, the batch's rows included (its io is batched), before any split.
    ran = checked_outputs(std::move(ran), lease.model().io(), batch.front().held->model, rows);
    metrics_.batch_rows.observe(static_cast<double>(rows));
    // Every lease ends before any answer: no callback runs with the slot in use.
    for (std::size_t k = 0; k < n; ++k) {
      batch[k].held->lease.reset();
      batch[k].held->slot.reset();
    }
    // Every answer is made before the first is given: a woken client that takes this core then
    // holds up no other answer's copying, and the pass's clients are woken back to back.
    std::vector<std::pair<callback<infer_result>, expected<infer_result>>> answers;
    answers.reserve(n);
    std::uint64_t first_row = 0;
    for (std::size_t k = 0; k < n; ++k) {
      auto held = std::move(batch.front().held);
      const auto own = batch.front().rows;
      answers.emplace_back(std::move(batch.front().done), infer_result{});
      batch.pop_front();
      if (!ran) {
        answers.back().second = ran.error();
        continue;
      }
      auto& result = *answers.back().second;
      if (n == 1) {
        result.outputs = std::move(*ran);
      } else {
        for (const auto& out : *ran) {
          const auto row_bytes = out.data.size() / rows;
          tensor mine;
          mine.name = out.name;
          mine.type = out.type;
          mine.shape = out.shape;
          mine.shape.front() = own;
          mine.data.assign(
              out.data.begin() + static_cast<std::ptrdiff_t>(first_row * row_bytes),
              out.data.begin() + static_cast<std::ptrdiff_t>((first_row + own) * row_bytes));
          result.outputs.push_back(std::move(mine));
        }
      }
      first_row += own;
      result.model = std::move(held->model);
      result.cache_hit = held->hit;
      result.load_wait_ms = held->wait_ms;
    }
    for (auto& [done, answer] : answers)
      done(std::move(answer));
  }
}

}  // namespace warm
