// warm-bench http: KServe V2 inference over HTTP against the HTTP transport alone.
//
// One process holds both servers, each a cpp-httplib server on its own free loopback port with
// the same thread-pool size (connections + 2) and the same httplib settings otherwise:
//   warm      warm::http::front (src/http/http_front.*) over a warm::runtime with one small dense
//             model registered and loaded: every call decodes the V2 JSON body, runs the inference
//             (a cache hit) and encodes the V2 JSON answer;
//   baseline  a bare httplib::Server whose POST handler reads the body and answers a fixed,
//             pre-encoded V2 response: the very bytes warm answered to the same request (so the
//             same size), with no decoding, model or encoding behind it — the floor HTTP sets.
// Then `rounds` times, interleaved (warm, baseline, baseline, warm, ...: each side runs first in
// every other round, so neither always gets the quieter machine), a phase of
// seconds / (2 x rounds) per server: `connections` client threads, each with its own keep-alive
// httplib::Client (connected one after another and warmed up by one call before the phase's clock
// starts: httplib listens with a backlog of 5, and a burst of connects overflows it), POST
// /v2/models/{m}/infer with the same pre-built batch-1 V2 JSON body in a closed loop (one call
// outstanding per connection). Every call is timed. A phase's requests/s counts the 200 answers
// that arrived before its deadline over its length (as wrk does), so one connection stalled past
// the deadline costs only its own share. Any answer other than 200 (or no answer) is an error and
// makes the exit status non-zero; each warm phase checks, on every connection's warm-up call,
// that the answer says "warm_cache_hit":true. Reported: the medians over rounds of warm's
// requests/s (rps) and of the baseline's, ratio = the median over rounds of
// warm_rps / baseline_rps (each pair saw the same machine state), and p50/p99/max of all warm
// calls (the baseline's as baseline_*). Clients and servers share the machine's cores.
// --binary sends the input and asks for the output in the V2 binary tensor data extension
// (Inference-Header-Content-Length) instead of JSON numbers; the baseline replays that answer.
// WARM_BENCH_VERBOSE=1 prints every phase's requests/s to stderr.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "benches.hpp"
#include "http/http_front.hpp"
#include "warm/runtime.hpp"

namespace warm::bench {
namespace {

using clock_type = std::chrono::steady_clock;

// {"inputs":[{"name":"input","shape":[1,W],"datatype":"FP32","data":[...]}]}, each float in its
// shortest round-trip form (as a V2 client would send it).
std::string v2_body(const tensor& input) {
  std::string out = "{\"inputs\":[{\"name\":\"input\",\"shape\":[1," +
                    std::to_string(input.shape.back()) + "],\"datatype\":\"FP32\",\"data\":[";
  for (std::size_t i = 0; i < input.data.size() / sizeof(float); ++i) {
    float v;
    std::memcpy(&v, input.data.data() + i * sizeof(float), sizeof v);
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
    if (i) out += ',';
    out.append(buffer, ec == std::errc() ? end : buffer);
  }
  return out + "]}]}";
}

// The same request in the binary tensor data extension: JSON naming binary_data_size, the input's
// bytes after it, and the answer asked for as binary too. Returns the body and its JSON's length.
std::pair<std::string, std::size_t> v2_binary_body(const tensor& input) {
  std::string out =
      "{\"inputs\":[{\"name\":\"input\",\"shape\":[1," + std::to_string(input.shape.back()) +
      "],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":" +
      std::to_string(input.data.size()) + "}}],\"parameters\":{\"binary_data_output\":true}}";
  const std::size_t json_length = out.size();
  out.append(reinterpret_cast<const char*>(input.data.data()), input.data.size());
  return {out, json_length};
}

bool is_hit(const std::string& body) {
  return body.find("\"warm_cache_hit\":true") != std::string::npos;
}

// The baseline server: answers every POST to the infer path with `answer`, on its own thread.
class baseline_server {
 public:
  baseline_server(std::string answer, int threads) : answer_(std::move(answer)) {
    server_.new_task_queue = [threads] {
      return new httplib::ThreadPool(static_cast<std::size_t>(threads));
    };
    // The same httplib settings as http::front::start: TCP_NODELAY and unlimited keep-alive.
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_max_count(1u << 20);
    server_.Post(R"(/v2/models/([^/]+)/infer)",
                 [this](const httplib::Request&, httplib::Response& res) {
                   res.status = 200;
                   res.set_content(answer_, "application/json");
                 });
  }
  // The bound port, or -1.
  int start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
    return port_;
  }
  ~baseline_server() {
    if (!thread_.joinable()) return;
    // httplib's stop() does nothing until listen_after_bind() has marked the server running.
    for (int i = 0; i < 5000 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_.stop();
    thread_.join();
  }

 private:
  std::string answer_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
};

// `connections` threads, each with its own keep-alive client to 127.0.0.1:`port`, POSTing `body`
// to `path` in a closed loop for `seconds`, started together once each, in turn, made one call.
phase_result run_phase(bool warm_server, int port, int connections, double seconds,
                       const std::string& path, const std::string& body,
                       const httplib::Headers& headers) {
  // calls: answered 200 before the deadline; failures: any other answer, or none; missed: a
  // warm-up answer from warm that was not a cache hit.
  std::vector<phase_tally> tallies(static_cast<std::size_t>(connections));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  clock_type::time_point start, deadline;
  std::vector<std::thread> pool;
  for (int c = 0; c < connections; ++c) {
    pool.emplace_back([&, c] {
      auto& mine = tallies[static_cast<std::size_t>(c)];
      mine.latencies_us.reserve(1 << 16);
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_connection_timeout(std::chrono::seconds(5));
      client.set_read_timeout(std::chrono::seconds(10));  // bounds a call, so a phase cannot hang
      auto call = [&](bool check_hit) {
        auto res = client.Post(path, headers, body, "application/json");
        if (res && res->status == 200) {
          if (check_hit && !is_hit(res->body)) mine.missed = true;
          return true;
        }
        ++mine.failures;
        if (mine.failure.empty())
          mine.failure =
              res ? "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200)
                  : "no answer: " + httplib::to_string(res.error());
        return false;
      };
      // Connect one after another: a burst overflows the backlog (a dropped SYN is retried after 1
      // s).
      while (ready.load() != c)
        std::this_thread::yield();
      call(warm_server);  // connects and warms both ends; checks the hit
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      for (;;) {
        auto before = clock_type::now();
        if (before >= deadline) break;
        bool ok = call(false);
        auto after = clock_type::now();
        if (ok && after <= deadline) ++mine.calls;
        mine.latencies_us.push_back(
            std::chrono::duration<double, std::micro>(after - before).count());
      }
    });
  }
  while (ready.load() != connections)
    std::this_thread::yield();
  start = clock_type::now();
  deadline = start + std::chrono::duration_cast<clock_type::duration>(
                         std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);
  for (auto& th : pool)
    th.join();

  return merge_tallies(tallies, start, seconds);
}

}  // namespace

int run_http(const http_options& options) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "warm-bench http: %s\n", message.c_str());
    return 1;
  };
  if (options.layers.size() < 2) return fail("--layers needs at least two widths");
  if (options.connections < 1 || options.rounds < 1)
    return fail("--connections and --rounds must be at least 1");

  scratch_dir dir("http");
  const std::string id = "http";
  auto created = loaded_single_model_runtime(dir, id, options.layers);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;

  const int threads = options.connections + 2;  // one per keep-alive connection, and spare
  http::front_options front_options;
  front_options.threads = static_cast<std::uint32_t>(threads);
  auto front = http::front::start(*rt, front_options);
  if (!front) return fail("warm front: " + front.error().to_string());

  int rc = 0;
  {
    const std::string path = "/v2/models/" + id + "/infer";
    const auto input = random_input(options.layers.front());
    std::string body = v2_body(input);
    httplib::Headers headers;
    if (options.binary) {
      auto [binary, json_length] = v2_binary_body(input);
      body = std::move(binary);
      headers.emplace("Inference-Header-Content-Length", std::to_string(json_length));
    }
    // The baseline answers what warm answers to this very request.
    httplib::Client probe("127.0.0.1", (*front)->port());
    probe.set_read_timeout(std::chrono::seconds(10));
    auto reference = probe.Post(path, headers, body, "application/json");
    if (!reference || reference->status != 200 || !is_hit(reference->body)) {
      (*front)->stop();
      return fail("warm front: the first call failed or missed: " +
                  (reference
                       ? std::to_string(reference->status) + " " + reference->body.substr(0, 200)
                       : "no answer"));
    }
    baseline_server baseline(reference->body, threads);
    const int baseline_port = baseline.start();
    if (baseline_port <= 0) {
      (*front)->stop();
      return fail("baseline server: cannot bind 127.0.0.1");
    }

    const double phase_seconds = options.seconds / (2.0 * options.rounds);
    std::vector<double> warm_rps, baseline_rps, ratios, warm_latencies, baseline_latencies;
    std::uint64_t errors = 0, baseline_errors = 0;
    for (int round = 0; round < options.rounds; ++round) {
      double round_warm = 0, round_base = 0;
      for (bool warm_phase : rotated_order<bool>({true, false}, round)) {
        auto result = run_phase(warm_phase, warm_phase ? (*front)->port() : baseline_port,
                                options.connections, phase_seconds, path, body, headers);
        if (!result.failure.empty())
          std::fprintf(stderr, "warm-bench http: %s: %s\n", warm_phase ? "warm" : "baseline",
                       result.failure.c_str());
        if (result.missed) {
          std::fprintf(stderr, "warm-bench http: a warm answer was not a cache hit\n");
          rc = 1;
        }
        if (std::getenv("WARM_BENCH_VERBOSE"))
          std::fprintf(stderr, "round %d %s %.0f rps\n", round, warm_phase ? "warm" : "baseline",
                       result.rps);
        auto& latencies = warm_phase ? warm_latencies : baseline_latencies;
        latencies.insert(latencies.end(), result.latencies_us.begin(), result.latencies_us.end());
        (warm_phase ? errors : baseline_errors) += result.failures;
        (warm_phase ? warm_rps : baseline_rps).push_back(result.rps);
        (warm_phase ? round_warm : round_base) = result.rps;
      }
      ratios.push_back(round_base > 0 ? round_warm / round_base : 0);
    }
    if (errors > 0 || baseline_errors > 0) rc = 1;

    nlohmann::ordered_json out{{"scenario", "http"},
                               {"rps", median(warm_rps)},
                               {"p50_us", percentile(warm_latencies, 50)},
                               {"p99_us", percentile(warm_latencies, 99)},
                               {"errors", errors},
                               {"baseline_rps", median(baseline_rps)},
                               {"ratio", median(ratios)},
                               {"connections", options.connections},
                               {"binary", options.binary},
                               {"seconds", options.seconds},
                               {"max_us", percentile(warm_latencies, 100)},
                               {"baseline_p50_us", percentile(baseline_latencies, 50)},
                               {"baseline_p99_us", percentile(baseline_latencies, 99)},
                               {"baseline_max_us", percentile(baseline_latencies, 100)},
                               {"baseline_errors", baseline_errors},
                               {"request_bytes", body.size()},
                               {"response_bytes", reference->body.size()},
                               {"layers", options.layers},
                               {"rounds", options.rounds}};
    std::printf("%s\n", out.dump().c_str());
  }                  // the baseline server stops here
  (*front)->stop();  // the front before the runtime it borrows
  front->reset();
  rt.reset();
  return rc;
}

}  // namespace warm::bench
