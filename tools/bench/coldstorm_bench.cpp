// warm-bench coldstorm: a burst of requests at a cold model must cost one load, and every request
// should be answered about when that load finishes.
//
// One model (~32 MiB by default) is registered but not loaded. The calling thread then fires
// `requests` requests with the callback API — ensure_loaded(sync) by default (--kind ensure: the
// cost of coalescing alone), or batch-1 inferences (--kind infer: each answer then also pays a
// full pass over the weights, ~1 ms for 32 MiB, unless --max-batch lets the waiters share passes
// of up to that many rows: dynamic batching) as fast as it can (the requests are built
// beforehand, so the burst times only warm), and each callback stamps when it ran, relative to
// the first call. Reported:
//   loads           status().loads.count after the storm (the contract: 1)
//   load_ms         status().loads.mean_ms, the load itself as the loader timed it
//   last_answer_ms  first request -> last answer
//   ratio           last_answer_ms / load_ms
// plus, for reading the ratio: issue_ms (time to fire the burst), first_answer_ms, hits (answers
// that found the model already loaded) and infer_ms (median of 20 hit-path inferences after the
// storm: what each waiting request still costs once the model is there).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int run_coldstorm(const coldstorm_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench coldstorm: %s\n", message.c_str());
    return 1;
  };
  if (options.requests == 0) return fail("--requests must be at least 1");
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.kind != "ensure" && options.kind != "infer")
    return fail("--kind must be ensure or infer");
  const bool infer = options.kind == "infer";

  scratch_dir dir("coldstorm");
  const std::string id = "storm";
  batching_options batching;
  batching.max_batch = options.max_batch;
  batching.max_queue =
      std::max<std::uint64_t>(1024, options.requests);  // the whole storm may queue
  auto created =
      single_model_runtime(dir, id, options.layers, nullptr, batching, options.auto_batch);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;

  const infer_request base{id, {random_input(options.layers.front(), 7)}};
  std::vector<infer_request> burst(options.requests, base);
  std::vector<clock_type::time_point> answered_at(options.requests);
  std::atomic<std::uint64_t> errors{0}, hits{0};
  std::string first_error;
  std::atomic<bool> have_error{false};
  countdown answers(options.requests);

  const auto t0 = clock_type::now();
  for (std::uint64_t i = 0; i < options.requests; ++i) {
    auto answer = [&, i](const warm::error* error, bool hit) {
      answered_at[i] = clock_type::now();
      if (error) {
        if (!have_error.exchange(true)) first_error = error->to_string();
        errors.fetch_add(1);
      } else if (hit) {
        hits.fetch_add(1);
      }
      answers.arrive();
    };
    if (infer)
      rt->infer(std::move(burst[i]), [answer](expected<infer_result> r) {
        answer(r ? nullptr : &r.error(), r && r->cache_hit);
      });
    else
      rt->ensure_loaded(id, true,
                        [answer](expected<void> r) { answer(r ? nullptr : &r.error(), false); });
  }
  const auto issued = clock_type::now();
  if (!answers.wait(std::chrono::seconds(300)))
    return fail("not every request was answered within 300 s");

  auto st = rt->status(id).get();
  if (!st) return fail(st.error().to_string());

  // What one inference costs once the model is resident (hit path, calling thread).
  std::vector<double> infer_ms;
  for (int i = 0; i < 20; ++i) {
    auto start = clock_type::now();
    auto r = rt->infer(base).get();
    infer_ms.push_back(ms_between(start, clock_type::now()));
    if (!r) return fail(r.error().to_string());
  }
  rt.reset();

  auto [first, last] = std::minmax_element(answered_at.begin(), answered_at.end());
  double last_ms = ms_between(t0, *last);
  double load_ms = st->loads.mean_ms;
  nlohmann::ordered_json out{
      {"scenario", "coldstorm"},
      {"kind", options.kind},
      {"max_batch", options.max_batch},
      {"auto_batch", options.auto_batch ? *options.auto_batch : runtime_options{}.auto_batch},
      {"requests", options.requests},
      {"loads", st->loads.count},
      {"answered", options.requests - errors.load()},
      {"errors", errors.load()},
      {"load_ms", load_ms},
      {"last_answer_ms", last_ms},
      {"ratio", load_ms > 0 ? last_ms / load_ms : 0.0},
      {"layers", options.layers},
      {"issue_ms", ms_between(t0, issued)},
      {"first_answer_ms", ms_between(t0, *first)},
      {"hits", hits.load()},
      {"infer_ms", percentile(infer_ms, 50)}};
  std::printf("%s\n", out.dump().c_str());
  if (errors.load() != 0)
    return fail(std::to_string(errors.load()) + " requests failed; first: " + first_error);
  if (st->loads.count != 1)
    return fail("expected exactly one load, saw " + std::to_string(st->loads.count));
  return 0;
}

}  // namespace warm::bench
