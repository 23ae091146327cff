// Dynamic batching through warm::runtime: requests that wait together share passes over the
// weights, each answered with its own rows; the queue bound and the delay hold.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gpu/host_device.hpp"
#include "support/runtime_fixture.hpp"
#include "warm/model_loader.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

using namespace warm;
using namespace std::chrono_literals;

namespace {

std::vector<float> floats_of(const tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Rows of distinct values: request k's row r holds k + r / 10 in every column.
tensor rows_input(int k, std::uint64_t rows) {
  auto t = test::input(rows);
  std::vector<float> values(rows * 16);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (int c = 0; c < 16; ++c)
      values[r * 16 + c] = 0.01f * static_cast<float>(k) + 0.1f * static_cast<float>(r);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

auto batching(std::uint64_t max_batch, std::chrono::microseconds delay,
              std::uint64_t max_queue = 1024) {
  return [=](runtime_options& o) {
    o.batching.max_batch = max_batch;
    o.batching.max_queue_delay = delay;
    o.batching.max_queue = max_queue;
  };
}

// Holds every pass at the device until permitted, recording its rows on arrival.
struct pass_gate {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::uint64_t> passes;  // rows of each pass, in the order they reached the device
  int permits = 0;                    // -1: open

  std::size_t seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return passes.size();
  }
  std::vector<std::uint64_t> rows() {
    std::lock_guard<std::mutex> lock(mutex);
    return passes;
  }
  // Lets n more passes through; n < 0 opens the gate until close().
  void permit(int n) {
    std::lock_guard<std::mutex> lock(mutex);
    permits = n < 0 ? -1 : permits + n;
    changed.notify_all();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex);
    permits = 0;
  }
  // What a pass calls on arrival: records its rows, then waits for a permit.
  std::function<void(std::uint64_t)> hook() {
    return [this](std::uint64_t rows) {
      std::unique_lock<std::mutex> lock(mutex);
      passes.push_back(rows);
      changed.notify_all();
      changed.wait(lock, [&] { return permits != 0; });
      if (permits > 0) --permits;
    };
  }
  // Makes `o`'s devices host devices that pass through this gate.
  void install(runtime_options& o) {
    o.make_device = [this](const device_spec& spec) -> expected<std::unique_ptr<device>> {
      host_device_hooks hooks;
      hooks.before_run = hook();
      return make_host_device(*spec.capacity, "host", std::move(hooks));
    };
  }
};

}  // namespace

TEST_CASE("requests that waited for a cold load share one pass, each answered with its own rows") {
  // Reference answers: the same requests, one pass each, on a runtime without batching.
  test::runtime_fixture plain({"a"});
  plain.register_all();
  const std::vector<std::uint64_t> rows{1, 2, 1, 3, 1};  // 8 rows in all
  std::vector<std::vector<float>> reference;
  for (int k = 0; k < 5; ++k) {
    auto r = plain.rt->infer({"a", {rows_input(k, rows[k])}}).get();
    REQUIRE(r);
    reference.push_back(floats_of(r->outputs.front()));
  }

  // max_batch 8 and a long delay: the pass runs once all five are queued (8 rows: full).
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, batching(8, 60s));
  f.register_all();
  f.loader->hold();
  std::vector<std::future<expected<infer_result>>> answers;
  for (int k = 0; k < 5; ++k)
    answers.push_back(f.rt->infer({"a", {rows_input(k, rows[k])}}));
  REQUIRE(test::eventually([&] { return f.loader->loads_of("a") == 1; }));
  f.loader->open_gate();
  for (int k = 0; k < 5; ++k) {
    INFO("request " << k);
    REQUIRE(answers[k].wait_for(20s) == std::future_status::ready);
    auto r = answers[k].get();
    REQUIRE(r);
    CHECK_FALSE(r->cache_hit);
    REQUIRE(r->outputs.front().shape == std::vector<std::uint64_t>{rows[k], 8});
    auto got = floats_of(r->outputs.front());
    REQUIRE(got.size() == reference[k].size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(reference[k][i]).epsilon(1e-5));
  }
  auto passes = f.rt->metrics().batch_rows.read();
  CHECK(passes.count == 1);  // one pass over the weights for all five
  CHECK(passes.sum == 8);
  CHECK(f.rt->metrics().requests_miss.value() == 5);
}

TEST_CASE("a batch that is not full waits the delay; past max_queue a request is refused at once") {
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, batching(8, 300ms, 2));
  f.register_all();
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  auto start = std::chrono::steady_clock::now();
  auto first = f.rt->infer({"a", {rows_input(0, 1)}});
  auto second = f.rt->infer({"a", {rows_input(1, 1)}});
  auto refused = f.rt->infer({"a", {rows_input(2, 1)}});  // the queue holds 2
  REQUIRE(refused.wait_for(1s) == std::future_status::ready);
  auto r = refused.get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::unavailable);
  CHECK(r.error().message == "the batch queue of model 'a' is full (2 requests)");
  auto bad = f.rt->infer({"a", {test::input(1, 15)}}).get();  // refused before queueing
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);
  CHECK(first.wait_for(100ms) == std::future_status::timeout);  // 2 rows of 8: waiting for more
  REQUIRE(first.wait_for(10s) == std::future_status::ready);
  REQUIRE(second.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  CHECK(first.get());
  CHECK(second.get());
  CHECK(f.rt->metrics().batch_rows.read().count == 1);
  CHECK(f.rt->metrics().requests_hit.value() == 2);
  CHECK(f.rt->metrics().requests_error.value() == 2);
}

TEST_CASE("a batch waiting for its delay holds no inference thread; stopping answers it") {
  // One inference thread: a wait held on it would keep "b"'s full batch from running for 60 s.
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, [](runtime_options& o) {
    batching(8, 60s)(o);
    o.inference_threads = 1;
  });
  f.register_all();
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  REQUIRE(f.rt->ensure_loaded("b", true).get());
  auto waiting = f.rt->infer({"a", {rows_input(0, 1)}});
  REQUIRE(test::eventually([&] { return f.rt->metrics().batch_rows.read().count == 0; }));
  auto full = f.rt->infer({"b", {rows_input(1, 8)}});  // 8 rows: runs at once
  REQUIRE(full.wait_for(10s) == std::future_status::ready);
  CHECK(full.get());
  CHECK(waiting.wait_for(50ms) == std::future_status::timeout);
  f.stop();  // a stopping runtime runs what waits for its delay
  REQUIRE(waiting.wait_for(0s) == std::future_status::ready);
  auto r = waiting.get();
  REQUIRE(r);
  CHECK(r->outputs.front().shape == std::vector<std::uint64_t>{1, 8});
}

TEST_CASE("rows leased before a reload and rows leased after it never share a pass") {
  // Reference answers of the old weights (seed 1, the fixture's "a") and of the new (seed 77).
  test::runtime_fixture plain({"a"});
  plain.register_all();
  const auto file = plain.dir / ("repo/a/1/" + std::string(model_file_name));
  auto answer_of = [](runtime& rt, int k) {
    auto r = rt.infer({"a", {rows_input(k, 1)}}).get();
    REQUIRE(r);
    return floats_of(r->outputs.front());
  };
  const auto old_answer = answer_of(*plain.rt, 0);
  auto rewrite = [](const std::filesystem::path& to) {  // new weights, as a new file in its place
    auto fresh = to.parent_path() / "fresh.safetensors";
    REQUIRE(write_dense_model(fresh, {{16, 8}, activation::relu, 77}));
    std::filesystem::rename(fresh, to);
  };
  rewrite(file);
  REQUIRE(plain.rt->unload("a").get());
  const auto new_answer = answer_of(*plain.rt, 1);
  REQUIRE(old_answer != answer_of(*plain.rt, 0));  // the weights did change

  // Passes of 2 rows, a long delay: the first request waits in the queue on the old weights'
  // lease while the model is unloaded and loaded again from the new file; the second, leased on
  // the new weights, fills the batch.
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, batching(2, 60s));
  f.register_all();
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  auto before = f.rt->infer({"a", {rows_input(0, 1)}});
  REQUIRE(before.wait_for(100ms) == std::future_status::timeout);  // queued, holding its lease
  rewrite(f.dir / ("repo/a/1/" + std::string(model_file_name)));
  REQUIRE(f.rt->unload("a").get());
  auto after = f.rt->infer({"a", {rows_input(1, 1)}});
  REQUIRE(before.wait_for(20s) == std::future_status::ready);
  REQUIRE(after.wait_for(20s) == std::future_status::ready);
  auto old_rows = before.get();
  auto new_rows = after.get();
  REQUIRE(old_rows);
  REQUIRE(new_rows);
  CHECK(floats_of(old_rows->outputs.front()) == old_answer);
  CHECK(floats_of(new_rows->outputs.front()) == new_answer);
  CHECK(f.rt->metrics().batch_rows.read().count == 2);  // one pass per set of weights
}

TEST_CASE("a model's own batching options replace the defaults, and outlive a restart") {
  // Defaults: passes of 4 rows. "a" batches by 2, "b" not at all, "c" by the defaults. The delay
  // is long: a pass runs when full, so the passes do not depend on when the requests arrive.
  test::runtime_fixture f({"a", "b", "c"}, {"host:64KiB"}, 3, batching(4, 60s));
  batching_options by_two;
  by_two.max_batch = 2;
  by_two.max_queue_delay = 60s;
  model_info a("a"), b("b"), c("c");
  a.batching = by_two;
  b.batching = batching_options{};
  REQUIRE(f.rt->register_model("a", a).get());
  REQUIRE(f.rt->register_model("b", b).get());
  REQUIRE(f.rt->register_model("c", c).get());

  // Four cold-start waiters for one model; returns the passes and rows batching ran for them.
  auto storm = [&](const std::string& model) {
    auto before = f.rt->metrics().batch_rows.read();
    f.loader->hold();
    std::vector<std::future<expected<infer_result>>> answers;
    for (int k = 0; k < 4; ++k)
      answers.push_back(f.rt->infer({model, {rows_input(k, 1)}}));
    REQUIRE(test::eventually([&] { return f.loader->loads_of(model) >= 1; }));
    f.loader->open_gate();
    for (auto& answer : answers) {
      REQUIRE(answer.wait_for(20s) == std::future_status::ready);
      CHECK(answer.get());
    }
    auto after = f.rt->metrics().batch_rows.read();
    return std::pair{after.count - before.count, after.sum - before.sum};
  };
  CHECK(storm("a") == std::pair<std::uint64_t, double>{2, 4});
  CHECK(storm("b") == std::pair<std::uint64_t, double>{0, 0});
  CHECK(storm("c") == std::pair<std::uint64_t, double>{1, 4});

  // The options are part of the registration: a different set is a different registration.
  auto again = f.rt->register_model("a", model_info("a")).get();
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::invalid_argument);
  batching_options bad;
  bad.max_batch = 4;
  bad.preferred_batch = {8};
  model_info d("d");
  d.batching = bad;
  auto refused = f.rt->register_model("d", d).get();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message == "model 'd': batching: preferred batch size 8 is outside 1..4");

  f.stop();
  f.start();  // "a"'s options come back from the registry's store
  CHECK(storm("a") == std::pair<std::uint64_t, double>{2, 4});
}

TEST_CASE("concurrent clients of a batched model each get their own rows (randomized)") {
  const auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::printf("batching_test: seed %u\n", seed);
  // "a" batches by up to 4 rows, no delay; "plain" is the same file, never batched: the reference.
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, batching(4, 0us));
  model_info plain("a");
  plain.batching = batching_options{};
  REQUIRE(f.rt->register_model("a", model_info("a"), true, true).get());
  REQUIRE(f.rt->register_model("plain", plain, true, true).get());
  std::vector<std::vector<float>> reference;  // [k * 3 + rows - 1]
  for (int k = 0; k < 7; ++k)
    for (std::uint64_t rows = 1; rows <= 3; ++rows) {
      auto r = f.rt->infer({"plain", {rows_input(k, rows)}}).get();
      REQUIRE(r);
      reference.push_back(floats_of(r->outputs.front()));
    }
  CHECK(f.rt->metrics().batch_rows.read().count == 0);

  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> clients;
  for (unsigned c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(seed + c);
      std::vector<std::pair<std::size_t, std::future<expected<infer_result>>>> sent;
      for (int n = 0; n < 150; ++n) {
        int k = static_cast<int>(rng() % 7);
        std::uint64_t rows = 1 + rng() % 3;
        sent.emplace_back(static_cast<std::size_t>(k) * 3 + rows - 1,
                          f.rt->infer({"a", {rows_input(k, rows)}}));
        if (rng() % 4 == 0) sent.back().second.wait();  // some clients wait, some pile up
      }
      for (auto& [which, answer] : sent) {
        auto r = answer.get();
        if (!r) {
          ++failed;
          continue;
        }
        auto got = floats_of(r->outputs.front());
        const auto& want = reference[which];
        bool same = got.size() == want.size();
        for (std::size_t i = 0; same && i < got.size(); ++i)
          same = std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::fabs(want[i]));
        if (!same) ++wrong;
      }
    });
  for (auto& t : clients)
    t.join();
  CHECK(failed == 0);
  CHECK(wrong == 0);
  auto passes = f.rt->metrics().batch_rows.read();
  CHECK(passes.sum >= 600);  // every request of "a" ran in a batched pass
}

TEST_CASE(
    "while another pass runs, a freed thread takes a fair share of the queue, not all of it") {
  auto gate = std::make_shared<pass_gate>();
  auto passes_seen = [gate] { return gate->seen(); };
  auto permit = [gate](int n) { gate->permit(n); };
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, [gate](runtime_options& o) {
    batching(32, 0us)(o);
    o.inference_threads = 2;
    gate->install(o);
  });
  f.register_all();
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  std::vector<std::future<expected<infer_result>>> answers;
  // Two passes of one row, one on each inference thread, held at the device.
  answers.push_back(f.rt->infer({"a", {rows_input(0, 1)}}));
  REQUIRE(test::eventually([&] { return passes_seen() == 1; }));
  answers.push_back(f.rt->infer({"a", {rows_input(1, 1)}}));
  REQUIRE(test::eventually([&] { return passes_seen() == 2; }));
  // 30 more queue behind them (both threads are busy).
  for (int k = 2; k < 32; ++k)
    answers.push_back(f.rt->infer({"a", {rows_input(k, 1)}}));
  // One pass ends; its thread takes half of the 31 rows queued or running (16), not all 30: the
  // other thread, back soon, takes the rest.
  permit(1);
  REQUIRE(test::eventually([&] { return passes_seen() == 3; }));
  permit(-1);
  for (auto& a : answers) {
    REQUIRE(a.wait_for(10s) == std::future_status::ready);
    CHECK(a.get());
  }
  // What follows depends on which thread the open gate wakes first (16 + 14, or 16 + 8 + 6, ...):
  // every row ran once, in passes no larger than the first share.
  const auto passes = gate->rows();
  REQUIRE(passes.size() >= 4);
  CHECK(std::vector<std::uint64_t>(passes.begin(), passes.begin() + 3) ==
        std::vector<std::uint64_t>{1, 1, 16});
  std::uint64_t rows = 0;
  for (auto r : passes) {
    CHECK(r <= 16);
    rows += r;
  }
  CHECK(rows == 32);
}

TEST_CASE("batching options are checked when the runtime starts") {
  runtime_options o;
  o.repositories = {"."};
  o.batching.max_batch = 8;
  o.batching.preferred_batch = {4, 9};
  auto refused = runtime::create(o);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK(refused.error().message == "batching: preferred batch size 9 is outside 1..8");
}

TEST_CASE("without batching settings, the waiters of a cold load and a backlog share passes") {
  // Reference answers: the same requests, one pass each, with automatic batching off.
  test::runtime_fixture plain({"a"}, {"host:64KiB"}, 2,
                              [](runtime_options& o) { o.auto_batch = 0; });
  plain.register_all();
  std::vector<std::vector<float>> reference;
  for (int k = 0; k < 12; ++k) {
    auto r = plain.rt->infer({"a", {rows_input(k, 1)}}).get();
    REQUIRE(r);
    reference.push_back(floats_of(r->outputs.front()));
  }
  CHECK(plain.rt->metrics().batch_rows.read().count == 0);  // off: no pass is a batched one

  auto gate = std::make_shared<pass_gate>();
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, [gate](runtime_options& o) {
    o.inference_threads = 2;  // the defaults otherwise: auto_batch 32, every hit inline
    gate->install(o);
  });
  f.register_all();
  f.loader->hold();
  std::vector<std::future<expected<infer_result>>> answers;
  for (int k = 0; k < 12; ++k)
    answers.push_back(f.rt->infer({"a", {rows_input(k, 1)}}));
  REQUIRE(test::eventually([&] { return f.loader->loads_of("a") == 1; }));
  f.loader->open_gate();
  // The first waiters start a pass on each thread at once (no delay); held there, the rest queue
  // behind them (each holding its lease) and share what follows.
  REQUIRE(test::eventually([&] {
    auto st = f.rt->status("a").get();
    return gate->seen() == 2 && st && st->in_flight == 12;
  }));
  gate->permit(-1);
  for (int k = 0; k < 12; ++k) {
    INFO("request " << k);
    REQUIRE(answers[k].wait_for(20s) == std::future_status::ready);
    auto r = answers[k].get();
    REQUIRE(r);
    CHECK_FALSE(r->cache_hit);
    auto got = floats_of(r->outputs.front());
    REQUIRE(got.size() == reference[k].size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(reference[k][i]).epsilon(1e-5));
  }
  // Two held passes, then what queued behind them: each pass that plans takes at least half of
  // what is queued (a fair share between the two threads), so a few passes, not one a request.
  auto passes = gate->rows();
  CHECK(passes.size() <= 7);
  CHECK(*std::max_element(passes.begin(), passes.end()) >= 4);
  std::uint64_t rows = 0;
  for (auto r : passes)
    rows += r;
  CHECK(rows == 12);
  CHECK(f.rt->metrics().batch_rows.read().sum == 12);

  // A hit the caller runs itself is never queued: it runs alone, at once, on this thread.
  const auto before = gate->seen();
  const auto batched = f.rt->metrics().batch_rows.read().count;
  REQUIRE(f.rt->infer({"a", {rows_input(0, 1)}}).get());
  CHECK(gate->seen() == before + 1);
  CHECK(f.rt->metrics().batch_rows.read().count == batched);
}

TEST_CASE(
    "automatic batching: hits over the inline limit queue; a registration's max_batch 0 and "
    "auto_batch 0 keep a model out") {
  auto gate = std::make_shared<pass_gate>();
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, [gate](runtime_options& o) {
    o.inference_threads = 1;
    o.inline_inference_limit = 0;  // every hit goes to the inference thread
    gate->install(o);
  });
  model_info never("b");
  never.batching = batching_options{};  // its own settings: max_batch 0, never batched
  REQUIRE(f.rt->register_model("a", model_info("a"), true, true).get());
  REQUIRE(f.rt->register_model("b", never, true, true).get());
  // Hold the thread with one pass of "a", queue nine hits of each model behind it.
  const auto seen = gate->seen();
  std::vector<std::future<expected<infer_result>>> a, b;
  a.push_back(f.rt->infer({"a", {rows_input(0, 1)}}));
  REQUIRE(test::eventually([&] { return gate->seen() == seen + 1; }));
  for (int k = 1; k < 10; ++k) {
    a.push_back(f.rt->infer({"a", {rows_input(k, 1)}}));
    b.push_back(f.rt->infer({"b", {rows_input(k, 1)}}));
  }
  gate->permit(-1);
  for (auto* list : {&a, &b})
    for (auto& r : *list) {
      REQUIRE(r.wait_for(20s) == std::future_status::ready);
      CHECK(r.get());
    }
  auto passes = gate->rows();
  passes.erase(passes.begin(), passes.begin() + static_cast<std::ptrdiff_t>(seen));
  // "a": 1, then its nine queued hits in one pass; "b": nine passes of one row.
  CHECK(std::count(passes.begin(), passes.end(), 9u) == 1);
  CHECK(std::count(passes.begin(), passes.end(), 1u) == 10);
  CHECK(passes.size() == 11);
  CHECK(f.rt->metrics().batch_rows.read().sum == 10);
}

TEST_CASE("auto_batch is checked when the runtime starts") {
  runtime_options o;
  o.repositories = {"."};
  o.auto_batch = 65537;
  auto refused = runtime::create(o);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK(refused.error().message == "auto_batch is over 65536");
}

TEST_CASE("a model's backlog of passes waits its turn behind other work for the threads") {
  auto gate = std::make_shared<pass_gate>();
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, [gate](runtime_options& o) {
    o.inference_threads = 1;
    o.inline_inference_limit = 0;  // every hit goes to the inference thread
    gate->install(o);
  });
  model_info batched("a"), never("b");
  batched.batching = batching_options{};
  batched.batching->max_batch = 2;
  never.batching = batching_options{};  // max_batch 0: each inference a task of its own
  REQUIRE(f.rt->register_model("a", batched, true, true).get());
  REQUIRE(f.rt->register_model("b", never, true, true).get());
  const auto seen = gate->seen();
  // One pass of "a" holds the thread; four more rows of "a" queue (two passes of two), then one
  // inference of "b".
  std::vector<std::future<expected<infer_result>>> answers;
  answers.push_back(f.rt->infer({"a", {rows_input(0, 1)}}));
  REQUIRE(test::eventually([&] { return gate->seen() == seen + 1; }));
  for (int k = 1; k < 5; ++k)
    answers.push_back(f.rt->infer({"a", {rows_input(k, 1)}}));
  answers.push_back(f.rt->infer({"b", {rows_input(5, 1)}}));
  gate->permit(-1);
  for (auto& r : answers) {
    REQUIRE(r.wait_for(20s) == std::future_status::ready);
    CHECK(r.get());
  }
  // "b" runs once the pass it queued behind ends, not after every pass "a" has queued.
  auto passes = gate->rows();
  passes.erase(passes.begin(), passes.begin() + static_cast<std::ptrdiff_t>(seen));
  CHECK(passes == std::vector<std::uint64_t>{1, 1, 2, 2});
}

namespace {

// A batched model with a dynamic inner dimension: input [-1, -1] F32, output [-1, 1], each row's
// sum. Holds every pass at `gate` until permitted.
class row_sums final : public resident_model {
 public:
  row_sums(std::unique_ptr<resident_model> inner, std::shared_ptr<pass_gate> gate)
      : resident_model(inner->owner(), io_of()), inner_(std::move(inner)), gate_(std::move(gate)) {}
  static model_io io_of() {
    model_io io;
    io.batched = true;
    io.inputs = {{"input", dtype::f32, {-1, -1}}};
    io.outputs = {{"sum", dtype::f32, {-1, 1}}};
    return io;
  }
  std::uint64_t bytes() const override { return inner_->bytes(); }
  std::uint64_t cost(std::uint64_t batch) const override { return batch; }
  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                    std::uint64_t batch) const override {
    gate_->hook()(batch);
    const auto& in = inputs.front();
    const auto width = in.shape.back();
    if (in.shape.front() != batch || in.data.size() != batch * width * sizeof(float))
      return make_error(errc::invalid_argument, "rows and bytes disagree");
    tensor out;
    out.name = "sum";
    out.type = dtype::f32;
    out.shape = {batch, 1};
    out.data.resize(batch * sizeof(float));
    for (std::uint64_t r = 0; r < batch; ++r) {
      float sum = 0;
      for (std::uint64_t c = 0; c < width; ++c) {
        float v;
        std::memcpy(&v, in.data.data() + (r * width + c) * sizeof(float), sizeof v);
        sum += v;
      }
      std::memcpy(out.data.data() + r * sizeof(float), &sum, sizeof sum);
    }
    return std::vector<tensor>{std::move(out)};
  }

 private:
  std::unique_ptr<resident_model> inner_;
  std::shared_ptr<pass_gate> gate_;
};

class row_sums_loader final : public model_loader {
 public:
  explicit row_sums_loader(std::shared_ptr<pass_gate> gate) : gate_(std::move(gate)) {}
  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) override {
    auto loaded = files_.load(dev, where, std::move(reservation), stats);
    if (!loaded) return loaded;
    return std::unique_ptr<resident_model>(std::make_unique<row_sums>(std::move(*loaded), gate_));
  }

 private:
  std::shared_ptr<pass_gate> gate_;
  file_loader files_;
};

// One row of `width` values k, k + 1, ...: its sum is width * k + width * (width - 1) / 2.
tensor row_of(std::uint64_t width, float k) {
  tensor t;
  t.name = "input";
  t.type = dtype::f32;
  t.shape = {1, width};
  std::vector<float> values(width);
  for (std::uint64_t c = 0; c < width; ++c)
    values[c] = k + static_cast<float>(c);
  t.data.resize(width * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace

TEST_CASE("requests with different inner dimensions never share a pass") {
  auto gate = std::make_shared<pass_gate>();
  test::runtime_fixture f({"a"}, {"host:64KiB"}, 2, [gate](runtime_options& o) {
    o.inference_threads = 1;
    o.inline_inference_limit = 0;  // hits go to the thread, automatically batched
    o.loader = std::make_shared<row_sums_loader>(gate);
  });
  gate->permit(-1);
  f.register_all(true);
  REQUIRE(f.rt->ensure_loaded("a", true).get());
  gate->close();
  const auto seen = gate->seen();
  std::vector<std::future<expected<infer_result>>> answers;
  const std::vector<std::uint64_t> widths{2, 2, 2, 3, 3, 2};
  answers.push_back(f.rt->infer({"a", {row_of(widths[0], 0)}}));  // held at the model
  REQUIRE(test::eventually([&] { return gate->seen() == seen + 1; }));
  for (std::size_t k = 1; k < widths.size(); ++k)
    answers.push_back(f.rt->infer({"a", {row_of(widths[k], static_cast<float>(k))}}));
  gate->permit(-1);
  for (std::size_t k = 0; k < widths.size(); ++k) {
    INFO("request " << k);
    REQUIRE(answers[k].wait_for(20s) == std::future_status::ready);
    auto r = answers[k].get();
    REQUIRE(r);
    REQUIRE(r->outputs.front().shape == std::vector<std::uint64_t>{1, 1});
    const auto w = static_cast<float>(widths[k]);
    CHECK(floats_of(r->outputs.front()).front() == w * static_cast<float>(k) + w * (w - 1) / 2);
  }
  // The held row, then 2 + 2 joined, 3 + 3 joined, and the last alone.
  auto passes = gate->rows();
  passes.erase(passes.begin(), passes.begin() + static_cast<std::ptrdiff_t>(seen));
  CHECK(passes == std::vector<std::uint64_t>{1, 2, 2, 1});
}
