// Request traces for the evaluation tools: reading and writing them, and making them,
// from the Azure Functions 2019 invocation counts with the mCache paper's methodology or from a
// Zipf popularity with Poisson arrivals. Pure logic, no CAF: warm-eval and the simulator use it.
// docs/eval/traces.md describes the methodology and the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/catalog.hpp"
#include "warm/error.hpp"

namespace warm::eval {

// One request: at time_ms (milliseconds from the start of the trace, finite, >= 0) for a model id.
struct request {
  double time_ms = 0;
  std::string model;
};

// A trace: requests sorted by time_ms (non-decreasing).
using trace = std::vector<request>;

// Reads a trace CSV: the header exactly `time_ms,model_id`, then one request per line, time_ms a
// finite decimal >= 0 and not before the previous row's, model_id non-empty. Empty lines are
// skipped, CRLF accepted, a header-only file is an empty trace. Errors: not_found / load_failed
// for the file, invalid_argument "PATH:LINE: what is wrong" for the first bad line.
expected<trace> read_trace(const std::string& path);

// Writes `t` as read_trace reads it; times as the shortest text that reads back exactly, so the
// round trip is exact. Refuses (before touching the file) unsorted or negative/non-finite times
// and ids that cannot be CSV fields; creates missing parent directories; replaces atomically.
expected<void> write_trace(const std::string& path, const trace& t);

// How make_azure_trace maps functions to models; see azure_options.
enum class mapping { random, round_robin, quantile, quantile_r };

// "random", "round-robin", "quantile", "quantile-r"; invalid_argument listing them otherwise.
expected<mapping> parse_mapping(const std::string& name);
// The name parse_mapping accepts for `m`.
std::string to_string(mapping m);

// A trace from Azure Functions per-minute invocation counts, after the mCache paper. Steps:
//  1. Read `invocations`: either layout of ../shared/traces (HashOwner,HashApp,HashFunction,
//     Trigger,<minute>… or HashFunction,HashOwner,HashApp,<n>_minute…). Identifying columns come
//     first; every later column is a minute of counts (non-negative integers).
//  2. Keep the functions whose Trigger equals `trigger` ("any" keeps all; a file without a
//     Trigger column keeps all).
//  3. The window: minute columns start_minute … start_minute+minutes-1 (0 = the file's first
//     minute column). A function's popularity is its total in the window. Functions with no
//     invocation in the window take no further part (they would add no request, and would
//     only dilute the quantiles below).
//  4. Cut: with k active functions sorted by popularity, the threshold is the nearest-rank
//     `cut` quantile, the ceil(cut·k)-th smallest total; functions above it are dropped (ties
//     at the threshold stay). cut = 1 keeps all.
//  5. Mapping, over the kept functions ordered most popular first (ties: file order), i = 0…n−1,
//     and the catalog's models ordered by decreasing load_ms (ties: catalog order), j = 0…M−1:
//     random: each function an independent uniform model; round-robin: j = i mod M;
//     quantile: group g = floor(i·M/n) (equal popularity groups, most popular first), j = g
//     (popular → slow to load); quantile-r: j = M−1−g (popular → fast to load).
//  6. Requests: each invocation of a kept function in window minute w (0-based) is kept with
//     probability `sample`, at a time uniform in [w·60000, (w+1)·60000) ms, quantized to whole
//     microseconds (so a written trace reads back exactly). The trace is sorted by time (ties:
//     file order).
//  7. Days: with days > 1 the window is played `days` times back to back (the trace's own daily
//     shape when the window is a whole day), day d shifted by d·minutes; day 0 is the one-day
//     trace, and every later day samples again from streams of its own.
// Deterministic per seed on every platform. Request times come from a random stream of their
// own per function (seed, file row), the random mapping from another: the four schemes give the
// same request times for one seed, the trigger or cut do not move the other functions'
// requests, and a smaller sample keeps a subset of a larger one's requests at the same times.
// Errors: the file's (read errors, bad counts with PATH:LINE), invalid_argument for options out of
// range (cut not in (0,1], sample not in [0,1], minutes or days 0, a window past the file's last
// minute column), an invalid catalog, or no function with the trigger / no invocation in the
// window.
struct azure_options {
  std::string invocations;       // path to the invocation counts
  std::string trigger = "http";  // a Trigger value ("http", "timer", …) or "any"
  double cut = 0.9;              // drop functions above this popularity quantile
  std::size_t start_minute = 0;  // index of the first minute column used
  std::size_t minutes = 60;      // minute columns used
  double sample = 0.15;          // probability of keeping each invocation
  mapping scheme = mapping::random;
  std::uint64_t seed = 1;
  std::size_t days = 1;  // how many times the window is played (>= 1)
};

// What make_azure_trace saw and decided, for reports and tests.
struct azure_stats {
  std::size_t functions = 0;             // rows of the file
  std::size_t with_trigger = 0;          // rows passing the trigger filter
  std::size_t active = 0;                // of those, invoked in the window
  std::size_t kept = 0;                  // active functions at or below the cut
  std::uint64_t cut_threshold = 0;       // the most invocations a kept function has in the window
  std::uint64_t window_invocations = 0;  // invocations of with_trigger functions in the window
  std::uint64_t kept_invocations = 0;    // invocations of kept functions (before sampling)
  std::string first_minute;              // the header of the window's first minute column
  bool trigger_column = false;           // whether the file has a Trigger column (else no filter)
  struct function {
    std::string id;                 // HashFunction
    std::uint64_t invocations = 0;  // in the window, before sampling
    std::string model;              // the model it maps to
  };
  std::vector<function> assignment;  // the kept functions, most popular first
};

// The trace above; when `stats` is given it receives what the run saw (filled on success).
expected<trace> make_azure_trace(const azure_options& o, const catalog& models,
                                 azure_stats* stats = nullptr);

// A synthetic trace of `requests` requests: model i of the catalog (0-based, rank order = catalog
// order) with probability ∝ 1/(i+1)^alpha, arrivals a Poisson process of `rate` requests per
// second starting at time 0 (the first request one exponential gap after it); times quantized to
// whole microseconds. Deterministic per seed; model choices and arrival times use separate
// streams. Requires alpha finite and >= 0, rate > 0 and a non-empty catalog (asserted; the CLI
// checks its input first).
trace make_zipf_trace(double alpha, const catalog& models, std::size_t requests, double rate,
                      std::uint64_t seed);

}  // namespace warm::eval
