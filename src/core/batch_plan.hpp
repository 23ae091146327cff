// Dynamic batching's decision: which of the requests queued for one model share the next pass
// over its weights. Pure logic, no threads and no clock: the caller says how long the oldest
// request has waited, so tests and tools are deterministic.
//
// The rules (after Triton's dynamic batcher):
//   - Requests run in arrival order. The candidate batch is the longest prefix of the queue whose
//     rows fit max_batch; a request larger than max_batch alone runs alone.
//   - The candidate runs at once when it is full: max_batch rows, or the next request does not
//     fit beside it.
//   - With preferred sizes, a prefix whose rows equal the largest preferred size runs at once
//     too; a smaller preferred size waits for more, like any other candidate.
//   - Otherwise it waits for more until the oldest request has waited max_queue_delay; then the
//     longest prefix of a preferred size runs, or, with none, the whole candidate.
//   - max_queue_delay 0 means no waiting: what is queued runs now.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "warm/batching.hpp"

namespace warm {

// How many of the queued requests (their rows, oldest first) to run now; 0: wait for more.
// `waited` is how long the oldest has been queued. Never 0 for a non-empty queue once waited
// reaches max_queue_delay.
std::size_t requests_to_run(const std::vector<std::uint64_t>& rows,
                            std::chrono::microseconds waited, const batching_options& options);

// How many of the `planned` requests (requests_to_run's answer for `rows`) one of `passes`
// concurrent passes of a model takes, when `queued_rows` rows are queued in all and its other
// passes run `running_rows`: a fair share of the model's work, ceil((queued_rows + running_rows) /
// passes) rows, and at least the first request. The rest waits for the model's other passes (each
// is back at the queue when it ends, and with a thread to spare the caller starts one more), so a
// pass does not take everything that arrived while the others ran and leave them the few that
// come next. Only without a delay (max_queue_delay 0), where what is left is ready to run at once:
// with a delay, a cut batch would wait for more. Unchanged, too, with one pass or preferred sizes
// (the planned size is one of them).
std::size_t fair_share(const std::vector<std::uint64_t>& rows, std::size_t planned,
                       std::uint64_t queued_rows, std::uint64_t running_rows, unsigned passes,
                       const batching_options& options);

// invalid: a preferred size of 0 or over max_batch, more than max_preferred_sizes of them, a
// zero max_queue while batching, or a setting past its limit below; the message names the field.
// Empty when valid. Every registration is checked so, whoever made it (a client, a served-models
// file, another instance of the cluster through etcd).
constexpr std::size_t max_preferred_sizes = 64;
constexpr std::uint64_t max_batch_limit = std::uint64_t{1} << 16;  // rows in one pass
constexpr std::uint64_t max_queue_limit = std::uint64_t{1} << 20;  // requests queued per model
constexpr std::chrono::microseconds max_queue_delay_limit{
    60'000'000};  // 60 s: a batch's longest wait
std::string check_batching(const batching_options& options);

}  // namespace warm
