// The engine of `warm-eval replay`: plays a request trace against a live warmd over Cap'n Proto,
// open loop, and summarises what it measured. replay_command.cpp is the CLI around it.
//
// Contract:
//  1. Open loop. Request i is sent at trace time_ms / speed after the replay starts, whether or
//     not earlier replies came back; every request is an asynchronous call on one connection and
//     one kj event loop, so as many are in flight as the trace demands. Sends are scheduled with
//     kj timers and checked against std::chrono::steady_clock, which is also the clock of every
//     figure recorded (a send is never early; `lag_ms` says how late it was).
//  2. Each request is an `infer` of its model with one F32 row of `width` values uniform in
//     [-1, 1) (batch 1), the widths given per model by the caller.
//  3. A reply with a non-ok Status is recorded with that code's name; a call that takes longer
//     than `request_timeout_s` is cancelled and recorded as "timeout". Both count as errors. A
//     broken connection stops the replay: no more requests are sent, and replay() returns an
//     `unavailable` error naming the address.
//  4. Threading: a replay_client and everything it returns belong to the thread that created it
//     (kj's event loop is per thread). Not copyable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eval/catalog.hpp"
#include "eval/trace.hpp"
#include "warm/error.hpp"

namespace warm::ctl {
struct connect_options;
}

namespace warm::eval_cli {

// One request as the replay saw it. Times in milliseconds from the replay's start.
struct replay_record {
  std::string model;
  double scheduled_ms = 0;    // trace time / speed
  double sent_ms = 0;         // when the call was sent (>= scheduled_ms)
  double latency_ms = 0;      // from the send to the reply (or the timeout)
  bool hit = false;           // the reply's cacheHit (false for errors)
  double load_wait_ms = 0;    // the reply's loadWaitMs (0 for errors)
  std::string status = "ok";  // "ok", a Status code name ("not_found", …) or "timeout"
};

struct replay_settings {
  double speed = 1;                // trace time is divided by this (> 0)
  double request_timeout_s = 300;  // per call (> 0)
  std::uint64_t seed = 1;          // of the input values
};

// Input width per model id.
using width_map = std::map<std::string, std::uint64_t>;

// A connection to warmd plus the calls the replay needs. Every method waits on the event loop;
// a transport failure becomes an `unavailable` error naming the address, never an exception.
class replay_client {
 public:
  // Connects (and authenticates with the token file, when given). unavailable when the daemon
  // cannot be reached or refuses the token.
  static expected<std::unique_ptr<replay_client>> connect(const ctl::connect_options& options);
  ~replay_client();
  replay_client(const replay_client&) = delete;
  replay_client& operator=(const replay_client&) = delete;

  // Registers every catalog model with id = path = model_id (the daemon's repository must hold
  // <root>/<model_id>/<version>/model.safetensors). All calls in flight at once; the first
  // non-ok Status is returned as an error naming the model. Idempotent, like registerModel.
  expected<void> register_models(const eval::catalog& models);

  // not_found naming the first model the daemon does not know.
  expected<void> check_registered(const std::vector<std::string>& models);

  // The model's input width, learned from the daemon (getModelStatus's inputWidth, read from the
  // model's file; nothing is loaded). invalid_argument for a model without one [batch, width]
  // input.
  expected<std::uint64_t> probe_width(const std::string& model);

  // Plays `requests` (every model in `widths`); one record per request, in trace order.
  expected<std::vector<replay_record>> replay(const eval::trace& requests, const width_map& widths,
                                              const replay_settings& settings);

 private:
  struct impl;
  explicit replay_client(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

// The input width of each model read from its file: <root>/<model>/<highest version>/
// model.safetensors under `repo` (the daemon's repository root, on this machine). Errors name
// the model and the file.
expected<width_map> widths_from_repository(const std::string& repo,
                                           const std::vector<std::string>& models);

// What the summary line reports. Latencies and load waits are over the requests answered ok;
// hit_ratio = hits / ok requests; percentiles are nearest-rank; 0 when there is nothing to count.
struct replay_summary {
  std::size_t requests = 0;
  std::size_t errors = 0;
  std::size_t hits = 0;
  double hit_ratio = 0;
  double latency_ms_mean = 0, latency_ms_p50 = 0, latency_ms_p99 = 0, latency_ms_max = 0;
  double load_wait_ms_mean = 0, load_wait_ms_p99 = 0;
  double duration_s = 0;  // from the start to the last reply
  double lag_ms_max = 0;  // the latest send relative to its schedule
  std::size_t in_flight_max = 0;
};

// Summarises `records`; in_flight_max is recomputed from the send times and latencies.
replay_summary summarize(const std::vector<replay_record>& records);

// The per-request CSV: header `sent_ms,model_id,latency_ms,hit,load_wait_ms,status`, hit as 0/1,
// times with microsecond precision. Written atomically; load_failed naming the path on error.
expected<void> write_records(const std::string& path, const std::vector<replay_record>& records);

}  // namespace warm::eval_cli
