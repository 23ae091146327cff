// warm-bench http: KServe V2 inference over HTTP against the HTTP transport alone.
//
// One process holds both servers, each a cpp-httplib server on its own free loopback port with
// the same thread-pool size (connections + 2) and the same httplib settings otherwise:
//   warm      warm::http::front (src/http/http_front.*) over a warm::runtime with one small dense
//             model registered and loaded: every call decodes the V2 JSON body, runs the inference
//             (a cache hit) and encodes the V2 JSON answer;
//   baseline  a bare httplib::Server whose POST handler reads the body and answers a fixed,
//             pre-encoded V2 response: the very bytes warm answered to the same request (so the
//             same size), with no decoding, model or encoding behind it — the floor HTTP sets;
//   work      a bare httplib::Server whose POST handler does the work any V2 server must: decodes
//             the body with warm's decoder, runs the same model file directly on a device of its
//             own (device::infer, no runtime between) and encodes the answer with warm's encoder,
//             byte for byte warm's answer (checked once). warm against it is what warm's front,
//             gate and runtime cost on top of the codec and the arithmetic.
// Then `rounds` times, interleaved (the three servers' order rotated each round, so none always
// gets the quieter machine), a phase of seconds / (3 x rounds) per server: `connections` client
// threads, each with its own keep-alive httplib::Client (connected one after another and warmed up
// by one call before the phase's clock starts: httplib listens with a backlog of 5, and a burst of
// connects overflows it), POST /v2/models/{m}/infer with the same pre-built batch-1 V2 JSON body in
// a closed loop (one call outstanding per connection). Every call is timed. A phase's requests/s
// counts the 200 answers that arrived before its deadline over its length (as wrk does), so one
// connection stalled past the deadline costs only its own share. Any answer other than 200 (or no
// answer) is an error and makes the exit status non-zero; each warm phase checks, on every
// connection's warm-up call, that the answer says "warm_cache_hit":true. Reported: the medians over
// rounds of warm's requests/s (rps), the baseline's and the work baseline's, ratio = the median
// over rounds of warm_rps / baseline_rps and work_ratio that of warm_rps / work_rps (each round's
// phases saw the same machine state), and p50/p99/max of all warm calls (the baselines' as
// baseline_*, work_*). Clients and servers share the machine's cores.
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
#include "http/v2_codec.hpp"
#include "warm/device.hpp"
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

// An httplib server on a free loopback port with `handler` for every POST to the infer path, the
// same pool size and the same settings as http::front::start (TCP_NODELAY, unlimited keep-alive),
// listening on its own thread from start() until destroyed.
class loopback_server {
 public:
  loopback_server(int threads, httplib::Server::Handler handler) {
    server_.new_task_queue = [threads] {
      return new httplib::ThreadPool(static_cast<std::size_t>(threads));
    };
    server_.set_tcp_nodelay(true);
    server_.set_keep_alive_max_count(1u << 20);
    server_.Post(R"(/v2/models/([^/]+)/infer)", std::move(handler));
  }
  // The bound port, or -1.
  int start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
    return port_;
  }
  ~loopback_server() {
    if (!thread_.joinable()) return;
    // httplib's stop() does nothing until listen_after_bind() has marked the server running.
    for (int i = 0; i < 5000 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_.stop();
    thread_.join();
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
};

// The baseline server: answers every POST to the infer path with `answer`.
class baseline_server {
 public:
  baseline_server(std::string answer, int threads)
      : answer_(std::move(answer)),
        server_(threads, [this](const httplib::Request&, httplib::Response& res) {
          res.status = 200;
          res.set_content(answer_, "application/json");
        }) {}
  int start() { return server_.start(); }

 private:
  std::string answer_;
  loopback_server server_;  // last: stopped before what its handler uses goes
};

// The work baseline: decodes each POST to the infer path, runs `model` on `dev` and encodes the
// answer as warm's front does (src/http/http_front.cpp), with nothing else between.
class work_server {
 public:
  work_server(std::string model_name, device& dev, const dense_resident& model, int threads)
      : model_name_(std::move(model_name)),
        dev_(dev),
        model_(model),
        server_(threads,
                [this](const httplib::Request& req, httplib::Response& res) { infer(req, res); }) {}
  int start() { return server_.start(); }

 private:
  void infer(const httplib::Request& req, httplib::Response& res) {
    std::optional<std::size_t> json_length;
    if (req.has_header("Inference-Header-Content-Length"))
      json_length = std::stoul(req.get_header_value("Inference-Header-Content-Length"));
    auto decoded = http::decode_infer_request(req.body, {}, json_length);
    if (!decoded || decoded->request.inputs.size() != 1) {
      res.status = 400;
      return;
    }
    const auto& input = decoded->request.inputs.front();
    infer_result result;
    result.model = model_name_;
    result.cache_hit = true;
    thread_local std::vector<float> out;
    const auto rows = input.shape.front();
    if (!dev_.infer(model_, reinterpret_cast<const float*>(input.data.data()),
                    input.data.size() / sizeof(float), rows, out)) {
      res.status = 500;
      return;
    }
    tensor output{model_.io().outputs.front().name,
                  dtype::f32,
                  {rows, out.size() / rows},
                  std::vector<std::byte>(out.size() * sizeof(float))};
    std::memcpy(output.data.data(), out.data(), output.data.size());
    result.outputs.push_back(std::move(output));
    const auto binary = http::binary_outputs(*decoded, 1);
    res.status = 200;
    if (!binary.front()) {
      res.body = http::encode_infer_response(result, decoded->id);
      res.set_header("Content-Type", "application/json; charset=utf-8");
      return;
    }
    std::size_t header_bytes = 0;
    res.body = http::encode_infer_response(result, decoded->id, binary, &header_bytes);
    res.set_header("Inference-Header-Content-Length", std::to_string(header_bytes));
    res.set_header("Content-Type", "application/octet-stream");
  }

  std::string model_name_;
  device& dev_;
  const dense_resident& model_;
  loopback_server server_;  // last: stopped before what its handler uses goes
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
  std::string model_path;
  auto created = loaded_single_model_runtime(dir, id, options.layers, &model_path);
  if (!created) return fail(created.error().to_string());
  auto& rt = *created;
  // The work baseline's copy of the model, on a host device of its own.
  auto file = open_model_file(model_path);
  if (!file) return fail(file.error().to_string());
  device_spec work_spec;
  work_spec.capacity = file->spec.data_bytes + (std::uint64_t{64} << 20);
  auto work_device = make_device(work_spec);
  if (!work_device) return fail(work_device.error().to_string());
  auto work_model = (*work_device)->load(*file);
  if (!work_model) return fail(work_model.error().to_string());

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
    work_server work(id, **work_device, **work_model, threads);
    const int baseline_port = baseline.start(), work_port = work.start();
    if (baseline_port <= 0 || work_port <= 0) {
      (*front)->stop();
      return fail("baseline servers: cannot bind 127.0.0.1");
    }
    // The work baseline must answer what warm answers, or it does other work.
    httplib::Client work_probe("127.0.0.1", work_port);
    work_probe.set_read_timeout(std::chrono::seconds(10));
    auto work_reference = work_probe.Post(path, headers, body, "application/json");
    if (!work_reference || work_reference->status != 200 ||
        work_reference->body != reference->body) {
      (*front)->stop();
      return fail("work baseline: its answer differs from warm's");
    }

    enum class side { warm, baseline, work };
    const double phase_seconds = options.seconds / (3.0 * options.rounds);
    struct side_tally {
      std::vector<double> rps, latencies;
      std::uint64_t errors = 0;
    };
    side_tally tally[3];
    std::vector<double> ratios, work_ratios;
    for (int round = 0; round < options.rounds; ++round) {
      double round_rps[3] = {0, 0, 0};
      for (side phase : rotated_order<side>({side::warm, side::baseline, side::work}, round)) {
        const bool warm_phase = phase == side::warm;
        const int port = warm_phase                ? (*front)->port()
                         : phase == side::baseline ? baseline_port
                                                   : work_port;
        auto result =
            run_phase(warm_phase, port, options.connections, phase_seconds, path, body, headers);
        const char* name = warm_phase ? "warm" : phase == side::baseline ? "baseline" : "work";
        if (!result.failure.empty())
          std::fprintf(stderr, "warm-bench http: %s: %s\n", name, result.failure.c_str());
        if (result.missed) {
          std::fprintf(stderr, "warm-bench http: a warm answer was not a cache hit\n");
          rc = 1;
        }
        if (std::getenv("WARM_BENCH_VERBOSE"))
          std::fprintf(stderr, "round %d %s %.0f rps\n", round, name, result.rps);
        auto& t = tally[static_cast<int>(phase)];
        t.latencies.insert(t.latencies.end(), result.latencies_us.begin(),
                           result.latencies_us.end());
        t.errors += result.failures;
        t.rps.push_back(result.rps);
        round_rps[static_cast<int>(phase)] = result.rps;
      }
      ratios.push_back(round_rps[1] > 0 ? round_rps[0] / round_rps[1] : 0);
      work_ratios.push_back(round_rps[2] > 0 ? round_rps[0] / round_rps[2] : 0);
    }
    for (const auto& t : tally)
      if (t.errors > 0) rc = 1;
    auto& warm_tally = tally[0];
    auto& base_tally = tally[1];
    auto& work_tally = tally[2];

    nlohmann::ordered_json out{{"scenario", "http"},
                               {"rps", median(warm_tally.rps)},
                               {"p50_us", percentile(warm_tally.latencies, 50)},
                               {"p99_us", percentile(warm_tally.latencies, 99)},
                               {"errors", warm_tally.errors},
                               {"baseline_rps", median(base_tally.rps)},
                               {"ratio", median(ratios)},
                               {"work_rps", median(work_tally.rps)},
                               {"work_ratio", median(work_ratios)},
                               {"connections", options.connections},
                               {"binary", options.binary},
                               {"seconds", options.seconds},
                               {"max_us", percentile(warm_tally.latencies, 100)},
                               {"baseline_p50_us", percentile(base_tally.latencies, 50)},
                               {"baseline_p99_us", percentile(base_tally.latencies, 99)},
                               {"baseline_max_us", percentile(base_tally.latencies, 100)},
                               {"baseline_errors", base_tally.errors},
                               {"work_p50_us", percentile(work_tally.latencies, 50)},
                               {"work_p99_us", percentile(work_tally.latencies, 99)},
                               {"work_errors", work_tally.errors},
                               {"request_bytes", body.size()},
                               {"response_bytes", reference->body.size()},
                               {"layers", options.layers},
                               {"rounds", options.rounds}};
    std::printf("%s\n", out.dump().c_str());
  }                  // the baseline servers stop here
  (*front)->stop();  // the front before the runtime it borrows
  front->reset();
  rt.reset();
  return rc;
}

}  // namespace warm::bench
