#include "runtime/batcher.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace warm {

batcher::batcher(batching_options options, executor& work, runtime_metrics& metrics)
    : options_(std::move(options)), work_(work), metrics_(metrics) {}

std::shared_ptr<batcher::queue> batcher::queue_of(const std::string& model) {
  std::lock_guard<std::mutex> lock(queues_mutex_);
  auto& q = queues_[model];
  if (!q) q = std::make_shared<queue>();
  return q;
}

void batcher::submit(std::shared_ptr<msg::acquired> held, infer_request request, std::uint64_t rows,
                     callback<infer_result> done) {
  auto q = queue_of(held->model);
  {
    std::lock_guard<std::mutex> lock(q->mutex);
    if (q->items.size() < options_.max_queue) {
      q->items.push_back(item{std::move(held), std::move(request), rows, std::move(done),
                              std::chrono::steady_clock::now()});
      if (q->drains > 0) {
        q->more.notify_one();
        return;
      }
      q->drains = 1;
      held = nullptr;
    }
  }
  if (held) {  // the queue is full: refused here, the lease given back first
    auto model = held->model;
    held->lease.reset();
    held = nullptr;
    return done(make_error(errc::unavailable, "the batch queue of model '" + model + "' is full (" +
                                                  std::to_string(options_.max_queue) + " requests)"));
  }
  work_.submit([this, q] { drain(q); });
}

void batcher::drain(const std::shared_ptr<queue>& shared) {
  auto& q = *shared;
  std::unique_lock<std::mutex> lock(q.mutex);
  std::vector<std::uint64_t> rows;
  for (;;) {
    if (q.items.empty()) {
      --q.drains;
      return;
    }
    // Each request has a row at least, so max_batch + 1 of them decide the next pass.
    rows.clear();
    for (const auto& i : q.items) {
      if (rows.size() > options_.max_batch) break;
      rows.push_back(i.rows);
    }
    const auto now = std::chrono::steady_clock::now();
    const auto oldest = q.items.front().queued;
    auto n = requests_to_run(rows, std::chrono::duration_cast<std::chrono::microseconds>(now - oldest), options_);
    if (n == 0) {
      if (q.drains > 1) {  // one drain waits for the delay; the others are not needed
        --q.drains;
        return;
      }
      q.more.wait_until(lock, oldest + options_.max_queue_delay);
      continue;
    }
    std::deque<item> batch;
    for (std::size_t k = 0; k < n; ++k) {
      metrics_.batch_queue_delay.observe(std::chrono::duration<double>(now - q.items.front().queued).count());
      batch.push_back(std::move(q.items.front()));
      q.items.pop_front();
    }
    // A backlog past this batch: another drain serves it on another thread meanwhile.
    const bool help = !q.items.empty() && q.drains < work_.threads();
    if (help) ++q.drains;
    lock.unlock();
    if (help) work_.submit([this, shared] { drain(shared); });
    run(batch);
    lock.lock();
  }
}

// Runs `batch` in passes, one per run of requests leased on the same slot (a reload between two
// requests gives them different weights), and answers each request with its rows.
void batcher::run(std::deque<item>& batch) {
  thread_local std::vector<float> input, output;
  while (!batch.empty()) {
    auto& lease = batch.front().held->lease;
    std::size_t n = 1;
    while (n < batch.size() && &batch[n].held->lease.slot() == &lease.slot()) ++n;
    std::uint64_t rows = 0;
    for (std::size_t k = 0; k < n; ++k) rows += batch[k].rows;

    const auto& spec = lease.model().spec();
    const auto output_width = spec.output_width();
    input.resize(rows * spec.input_width());
    auto* at = reinterpret_cast<unsigned char*>(input.data());
    for (std::size_t k = 0; k < n; ++k) {
      const auto& data = batch[k].request.inputs.front().data;
      std::memcpy(at, data.data(), data.size());
      at += data.size();
    }
    auto ran = lease.owner().infer(lease.model(), input.data(), input.size(), rows, output);
    metrics_.batch_rows.observe(static_cast<double>(rows));
    // Every lease ends before any answer: no callback runs with the slot in use.
    for (std::size_t k = 0; k < n; ++k) {
      batch[k].held->lease.reset();
      batch[k].held->slot.reset();
    }
    std::uint64_t first_row = 0;
    for (std::size_t k = 0; k < n; ++k) {
      auto done = std::move(batch.front().done);
      auto held = std::move(batch.front().held);
      const auto own = batch.front().rows;
      batch.pop_front();
      if (!ran) {
        done(ran.error());
        continue;
      }
      infer_result result;
      tensor out;
      out.name = "output";
      out.type = dtype::f32;
      out.shape = {own, output_width};
      out.data.resize(own * output_width * sizeof(float));
      std::memcpy(out.data.data(), output.data() + first_row * output_width, out.data.size());
      first_row += own;
      result.outputs.push_back(std::move(out));
      result.model = held->model;
      result.cache_hit = held->hit;
      result.load_wait_ms = held->wait_ms;
      done(std::move(result));
    }
  }
}

}  // namespace warm
