// The HTTP front driven with a real HTTP client (cpp-httplib's): every KServe V2 and repository
// endpoint over a runtime in this process, then the real warmd with --http, its /metrics and its
// token. Bad input of every kind gets its status and a JSON error; nothing is a 500.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "http/http_front.hpp"
#include "support/runtime_fixture.hpp"
#include "support/warmd_process.hpp"

using namespace warm;
using namespace warm::test;
using json = nlohmann::json;

namespace {

// A runtime over models a, b (dense 16 → 8) and an HTTP front on a free loopback port.
struct http_fixture {
  explicit http_fixture(http::front_options o = {}) : f({"a", "b", "bad"}) {
    f.register_all();
    o.host = "127.0.0.1";
    o.port = 0;
    o.request_timeout = std::chrono::seconds(20);
    auto started = http::front::start(*f.rt, std::move(o));
    REQUIRE(started);
    front = std::move(*started);
    client = std::make_unique<httplib::Client>("127.0.0.1", front->port());
  }

  httplib::Result post(const std::string& path, const std::string& body) {
    return client->Post(path.c_str(), body, "application/json");
  }

  runtime_fixture f;
  std::unique_ptr<http::front> front;
  std::unique_ptr<httplib::Client> client;
};

std::string request_body(std::uint64_t batch = 1, float value = 0.5f, bool nested = false) {
  json rows = json::array();
  json flat = json::array();
  for (std::uint64_t b = 0; b < batch; ++b) {
    json row = json::array();
    for (int i = 0; i < 16; ++i) {
      row.push_back(value + static_cast<float>(b));
      flat.push_back(value + static_cast<float>(b));
    }
    rows.push_back(row);
  }
  return json{{"inputs",
               {{{"name", "input"},
                 {"shape", {batch, 16}},
                 {"datatype", "FP32"},
                 {"data", nested ? rows : flat}}}}}
      .dump();
}

std::vector<float> floats(const tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

std::string error_of(const httplib::Result& r) {
  REQUIRE(r);
  auto body = json::parse(r->body, nullptr, false);
  REQUIRE(body.is_object());
  REQUIRE(body.contains("error"));
  return body["error"].get<std::string>();
}

// Prometheus samples, "name{labels}" → value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    auto value = line.substr(space + 1);
    out[line.substr(0, space)] = value == "+Inf" ? INFINITY : std::stod(value);
  }
  return out;
}

// Registers `model` in the daemon's state directory through the library, while the daemon is
// down (HTTP has no registration route); the next start serves it.
void register_offline(warmd_process& d, const std::string& model) {
  runtime_options o;
  o.repositories = {d.repo().string()};
  o.state_dir = (d.dir() / "state").string();
  auto rt = runtime::create(o);
  REQUIRE(rt);
  REQUIRE((*rt)->register_model(model, {model}).get());
}

}  // namespace

TEST_CASE("health, server metadata and model metadata; /ready never triggers a load") {
  http_fixture h;
  auto live = h.client->Get("/v2/health/live");
  REQUIRE(live);
  CHECK(live->status == 200);
  auto ready = h.client->Get("/v2/health/ready");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  auto server = h.client->Get("/v2");
  REQUIRE(server);
  CHECK(json::parse(server->body)["name"] == "warm");

  auto meta = h.client->Get("/v2/models/a");
  REQUIRE(meta);
  REQUIRE(meta->status == 200);
  auto m = json::parse(meta->body);
  CHECK(m["name"] == "a");
  CHECK(m["inputs"][0]["datatype"] == "FP32");
  CHECK(m["inputs"][0]["shape"] == json::array({-1, 16}));
  CHECK(m["outputs"][0]["shape"] == json::array({-1, 8}));
  CHECK(h.client->Get("/v2/models/nope")->status == 404);

  auto not_loaded = h.client->Get("/v2/models/a/ready");
  REQUIRE(not_loaded);
  CHECK(not_loaded->status == 400);
  CHECK_THAT(error_of(not_loaded), Catch::Contains("NOT_LOADED"));
  CHECK(h.client->Get("/v2/models/nope/ready")->status == 404);
  CHECK(h.f.loader->started().empty());  // neither metadata nor readiness loaded anything
  CHECK(state_of(*h.f.rt, "a") == model_state::not_loaded);
}

TEST_CASE("infer loads on demand, then hits; nested and flat data agree with the runtime") {
  http_fixture h;
  auto first = h.post("/v2/models/a/infer", request_body(2, 0.25f, true));
  REQUIRE(first);
  REQUIRE(first->status == 200);
  auto body = json::parse(first->body);
  CHECK(body["model_name"] == "a");
  CHECK(body["parameters"]["warm_cache_hit"] == false);
  CHECK(body["outputs"][0]["name"] == "output");
  CHECK(body["outputs"][0]["shape"] == json::array({2, 8}));
  CHECK(h.client->Get("/v2/models/a/ready")->status == 200);

  auto again = h.post("/v2/models/a/infer", request_body(2, 0.25f, false));
  REQUIRE(again);
  auto hit = json::parse(again->body);
  CHECK(hit["parameters"]["warm_cache_hit"] == true);
  // One Content-Type, naming the charset (so that httplib does not compress the answer).
  CHECK(again->get_header_value("Content-Type") == "application/json; charset=utf-8");
  CHECK(again->get_header_value_count("Content-Type") == 1);
  CHECK(hit["outputs"] == body["outputs"]);

  // The HTTP request's rows are all 0.25 and all 1.25: the same two rows sent to the runtime
  // directly give the same 16 outputs, bit for bit.
  auto rows = input(2, 16, 0.25f);
  std::vector<float> values(32, 0.25f);
  std::fill(values.begin() + 16, values.end(), 1.25f);
  std::memcpy(rows.data.data(), values.data(), rows.data.size());
  auto direct = h.f.rt->infer({"a", {rows}}).get();
  REQUIRE(direct);
  auto expected = floats(direct->outputs[0]);
  auto& data = hit["outputs"][0]["data"];
  REQUIRE(expected.size() == 16);
  REQUIRE(data.size() == 16);
  for (std::size_t i = 0; i < 16; ++i)
    CHECK(data[i].get<float>() == expected[i]);
  CHECK(expected[0] != expected[8]);  // the rows differ, so a swapped or repeated row would show

  // A vmodel name serves its active model.
  REQUIRE(h.f.rt->set_vmodel("live", "b").get());
  auto via_alias = h.post("/v2/models/live/infer", request_body());
  REQUIRE(via_alias);
  REQUIRE(via_alias->status == 200);
  CHECK(json::parse(via_alias->body)["model_name"] == "b");
  CHECK(json::parse(h.client->Get("/v2/models/live")->body)["parameters"]["warm_model"] == "b");
  CHECK(h.client->Get("/v2/models/live/ready")->status == 200);
}

TEST_CASE(
    "the binary tensor data extension: binary inputs in, binary outputs out, equal to JSON's") {
  http_fixture h;
  std::vector<float> values(32, 0.25f);
  std::fill(values.begin() + 16, values.end(), 1.25f);
  const std::string header =
      R"({"id":"bin","inputs":[{"name":"input","shape":[2,16],"datatype":"FP32","parameters":{"binary_data_size":128}}],)"
      R"("outputs":[{"name":"output","parameters":{"binary_data":true}}]})";
  std::string body = header;
  body.append(reinterpret_cast<const char*>(values.data()), 128);
  httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(header.size())}};
  auto r = h.client->Post("/v2/models/a/infer", headers, body, "application/octet-stream");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  CHECK(r->get_header_value("Content-Type") == "application/octet-stream");
  auto json_length = std::stoull(r->get_header_value("Inference-Header-Content-Length"));
  REQUIRE(json_length + 64 == r->body.size());
  auto head = json::parse(r->body.substr(0, json_length));
  CHECK(head["id"] == "bin");
  CHECK(head["outputs"][0]["shape"] == json::array({2, 8}));
  CHECK(head["outputs"][0]["parameters"]["binary_data_size"] == 64);
  std::vector<float> binary_out(16);
  std::memcpy(binary_out.data(), r->body.data() + json_length, 64);

  // The same rows as JSON, answered as JSON: the same floats, bit for bit.
  auto plain = json::parse(h.post("/v2/models/a/infer", request_body(2, 0.25f))->body);
  auto& data = plain["outputs"][0]["data"];
  REQUIRE(data.size() == 16);
  for (std::size_t i = 0; i < 16; ++i)
    CHECK(data[i].get<float>() == binary_out[i]);
  CHECK(binary_out[0] != binary_out[8]);

  // Binary in, JSON out (no binary_data asked); and bad framing is a 400 naming the header.
  std::string json_out =
      R"({"inputs":[{"name":"input","shape":[2,16],"datatype":"FP32","parameters":{"binary_data_size":128}}]})";
  std::string body2 = json_out;
  body2.append(reinterpret_cast<const char*>(values.data()), 128);
  auto r2 = h.client->Post("/v2/models/a/infer",
                           {{"Inference-Header-Content-Length", std::to_string(json_out.size())}},
                           body2, "application/octet-stream");
  REQUIRE(r2);
  REQUIRE(r2->status == 200);
  CHECK(json::parse(r2->body)["outputs"][0]["data"] == data);
  for (const char* bad : {"x", "-1", "", "99999999999999999999999"}) {
    auto refused = h.client->Post("/v2/models/a/infer", {{"Inference-Header-Content-Length", bad}},
                                  body2, "application/octet-stream");
    REQUIRE(refused);
    CHECK(refused->status == 400);
    CHECK_THAT(error_of(refused), Catch::Contains("Inference-Header-Content-Length"));
  }
  auto past = h.client->Post(
      "/v2/models/a/infer", {{"Inference-Header-Content-Length", std::to_string(body2.size() + 1)}},
      body2, "application/octet-stream");
  REQUIRE(past);
  CHECK(past->status == 400);
  auto extensions = json::parse(h.client->Get("/v2")->body)["extensions"];
  CHECK(std::find(extensions.begin(), extensions.end(), "binary_tensor_data") != extensions.end());
}

TEST_CASE("bad requests get 400, 404, 413 or 503 with a JSON error, and the server keeps serving") {
  http_fixture h;
  CHECK_THAT(error_of(h.post("/v2/models/a/infer", "{\"inputs\": [")),
             Catch::Contains("not valid JSON"));
  CHECK(h.post("/v2/models/a/infer", "{\"inputs\": [")->status == 400);
  auto int32 =
      h.post("/v2/models/a/infer",
             R"({"inputs":[{"name":"input","shape":[1,2],"datatype":"INT32","data":[1,2]}]})");
  CHECK(int32->status == 400);
  CHECK_THAT(error_of(int32), Catch::Contains("INT32"));
  auto shape =
      h.post("/v2/models/a/infer",
             R"({"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]})");
  CHECK(shape->status == 400);
  CHECK_THAT(error_of(shape), Catch::Contains("the model takes input F32 [-1, 16]"));
  auto count =
      h.post("/v2/models/a/infer",
             R"({"inputs":[{"name":"input","shape":[1,16],"datatype":"FP32","data":[1]}]})");
  CHECK(count->status == 400);
  auto unknown = h.post("/v2/models/nope/infer", request_body());
  CHECK(unknown->status == 404);
  CHECK_THAT(error_of(unknown), Catch::Contains("nope"));
  CHECK(h.client->Get("/v2/nothing/here")->status == 404);

  h.f.loader->fail("bad");
  auto failing = h.post("/v2/models/bad/infer", request_body());
  REQUIRE(failing);
  CHECK(failing->status == 503);
  auto message = error_of(failing);
  auto again = h.post("/v2/models/bad/infer", request_body());  // answered from the failure record
  CHECK(again->status == 503);
  auto index = json::parse(h.post("/v2/repository/index", "")->body);
  for (auto& m : index)
    if (m["name"] == "bad") CHECK(m["reason"] == message);

  auto ok = h.post("/v2/models/a/infer", request_body());  // the server is still serving
  REQUIRE(ok);
  CHECK(ok->status == 200);
}

TEST_CASE(
    "a route asked with a method it does not take is 405 with Allow; an unknown path stays 404") {
  http_fixture h;
  auto wrong = [&](httplib::Result r, const char* allow) {
    REQUIRE(r);
    CHECK(r->status == 405);
    CHECK(r->get_header_value("Allow") == allow);
    CHECK_THAT(error_of(r), Catch::Contains("is not allowed") && Catch::Contains(allow));
  };
  wrong(h.client->Get("/v2/models/a/infer"), "POST");
  wrong(h.client->Get("/v2/models/a/versions/1/infer"), "POST");
  wrong(h.client->Put("/v2/repository/index", "{}", "application/json"), "POST");
  wrong(h.client->Delete("/v2/models/a"), "GET, HEAD");
  wrong(h.post("/v2/health/ready", "{}"), "GET, HEAD");
  wrong(h.post("/metrics", ""), "GET, HEAD");
  CHECK(h.client->Get("/v2/models/a/infer/more")->status == 404);
  CHECK(h.post("/v2/models//infer", request_body())->status == 404);
  CHECK(h.client->Get("/v2/models/a")->status == 200);  // the right method is served as ever
}

TEST_CASE("bodies over the limit get 413, whatever their content type") {
  http::front_options o;
  o.max_request_bytes = 4096;
  http_fixture h(o);
  std::string big = request_body();
  big.insert(big.size() - 1, ",\"pad\":\"" + std::string(8000, 'x') + "\"");
  auto r = h.post("/v2/models/a/infer", big);
  REQUIRE(r);
  CHECK(r->status == 413);
  // curl -d sends form-urlencoded; a body over 8 KiB must still reach the V2 decoder.
  http::front_options roomy;
  http_fixture g(roomy);
  auto form = g.client->Post("/v2/models/a/infer", big, "application/x-www-form-urlencoded");
  REQUIRE(form);
  CHECK(form->status == 200);
}

TEST_CASE("repository API: index with states, load and unload") {
  http_fixture h;
  auto index = h.post("/v2/repository/index", "");
  REQUIRE(index);
  REQUIRE(index->status == 200);
  auto all = json::parse(index->body);
  REQUIRE(all.size() == 3);
  CHECK(all[0]["name"] == "a");
  CHECK(all[0]["state"] == "UNAVAILABLE");

  auto load = h.post("/v2/repository/models/a/load", "");
  REQUIRE(load);
  CHECK(load->status == 200);
  CHECK(state_of(*h.f.rt, "a") == model_state::loaded);
  auto ready = json::parse(h.post("/v2/repository/index", R"({"ready": true})")->body);
  REQUIRE(ready.size() == 1);
  CHECK(ready[0]["name"] == "a");
  CHECK(ready[0]["state"] == "READY");
  CHECK(h.post("/v2/repository/index", R"({"ready": 1})")->status == 400);
  CHECK(h.post("/v2/repository/index", "[")->status == 400);

  auto unload = h.post("/v2/repository/models/a/unload", "");
  REQUIRE(unload);
  CHECK(unload->status == 200);
  CHECK(state_of(*h.f.rt, "a") == model_state::not_loaded);
  CHECK(h.client->Get("/v2/models/a/ready")->status == 400);
  CHECK(h.post("/v2/repository/models/nope/load", "")->status == 404);
  CHECK(h.post("/v2/repository/models/nope/unload", "")->status == 404);
  // Unloaded, the model still serves: the next request loads it again.
  CHECK(h.post("/v2/models/a/infer", request_body())->status == 200);
}

TEST_CASE("/metrics parses back and its counters move with requests") {
  http::front_options o;
  o.per_model_metrics = true;
  http_fixture h(o);
  auto scrape = [&] {
    auto r = h.client->Get("/metrics");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    CHECK_THAT(r->get_header_value("Content-Type"), Catch::StartsWith("text/plain; version=0.0.4"));
    return samples(r->body);
  };
  auto before = scrape();
  CHECK(before.at("warm_requests_total{outcome=\"hit\"}") == 0);
  CHECK(before.at("warm_models_registered") == 3);
  REQUIRE(h.post("/v2/models/a/infer", request_body())->status == 200);
  REQUIRE(h.post("/v2/models/a/infer", request_body())->status == 200);
  REQUIRE(h.post("/v2/models/a/infer", "{}")->status ==
          400);  // refused before the runtime: no request
  REQUIRE(h.post("/v2/models/nope/infer", request_body())->status == 404);
  auto after = scrape();
  CHECK(after.at("warm_requests_total{outcome=\"miss\"}") == 1);
  CHECK(after.at("warm_requests_total{outcome=\"hit\"}") == 1);
  CHECK(after.at("warm_requests_total{outcome=\"error\"}") == 1);
  CHECK(after.at("warm_load_seconds_count") == 1);
  CHECK(after.at("warm_models_loaded{device=\"host\"}") == 1);
  CHECK(after.at("warm_model_loaded{model=\"a\"}") == 1);
  CHECK(after.at("warm_model_loaded{model=\"b\"}") == 0);
}

TEST_CASE("a remote-enabled front needs the token everywhere but health") {
  http::front_options o;
  o.allow_remote = true;
  o.token = "0123456789abcdef0123";
  http_fixture h(o);
  CHECK(h.client->Get("/v2/health/live")->status == 200);
  auto refused = h.client->Get("/v2/models/a");
  REQUIRE(refused);
  CHECK(refused->status == 401);
  CHECK_THAT(error_of(refused), Catch::Contains("Bearer"));
  CHECK(h.post("/v2/models/a/infer", request_body())->status == 401);
  CHECK(h.f.loader->started().empty());
  h.client->set_bearer_token_auth("wrong-token-wrong-token");
  CHECK(h.client->Get("/metrics")->status == 401);
  h.client->set_bearer_token_auth(o.token.c_str());
  CHECK(h.client->Get("/v2/models/a")->status == 200);
  CHECK(h.post("/v2/models/a/infer", request_body())->status == 200);

  http::front_options no_token;
  no_token.allow_remote = true;
  runtime_fixture f({"a"});
  CHECK_FALSE(http::front::start(*f.rt, no_token));
  http::front_options remote_host;
  remote_host.host = "0.0.0.0";
  CHECK_FALSE(http::front::start(*f.rt, remote_host));
}

TEST_CASE("warmd --http serves V2 and /metrics on a free loopback port, and stops cleanly") {
  warmd_process d;
  d.log_level = "info";
  d.write_model("m", {16, 8});
  d.start({"--http", "127.0.0.1:0"});
  httplib::Client c("127.0.0.1", d.announced_port("serving HTTP on 127.0.0.1:"));
  auto missing = c.Post("/v2/models/m/infer", request_body(), "application/json");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  // HTTP has no registration (the repository API loads what is registered): register through the
  // library on the daemon's state directory while it is down; the restarted daemon serves it.
  CHECK(d.stop() == 0);
  register_offline(d, "m");
  d.start({"--http", "127.0.0.1:0", "--metrics-per-model"});
  httplib::Client c2("127.0.0.1", d.announced_port("serving HTTP on 127.0.0.1:"));
  auto served = c2.Post("/v2/models/m/infer", request_body(3), "application/json");
  REQUIRE(served);
  REQUIRE(served->status == 200);
  CHECK(json::parse(served->body)["outputs"][0]["shape"] == json::array({3, 8}));
  auto metrics = c2.Get("/metrics");
  REQUIRE(metrics);
  auto s = samples(metrics->body);
  CHECK(s.at("warm_requests_total{outcome=\"miss\"}") == 1);
  CHECK(s.at("warm_model_loaded{model=\"m\"}") == 1);
  CHECK(d.stop() == 0);
}

TEST_CASE(
    "warmd refuses a non-loopback --http without --allow-remote, and a unix path that is no "
    "socket") {
  warmd_process d;
  CHECK(d.run_to_exit({"--http", "0.0.0.0:0"}) == 2);
  CHECK(d.run_to_exit({"--http", "127.0.0.1:notaport"}) == 2);
  auto file = d.dir() / "not-a-socket";
  std::ofstream(file) << "keep me";
  CHECK(d.run_to_exit({"--http", "unix:" + file.string()}) == 2);
  std::ifstream kept(file);
  std::string text;
  std::getline(kept, text);
  CHECK(text == "keep me");
}

TEST_CASE(
    "warmd --max-batch: concurrent requests share passes, each answered with its rows; /metrics "
    "counts them") {
  warmd_process d;
  d.log_level = "info";
  d.write_model("m", {16, 8});
  register_offline(d, "m");
  d.start({"--http", "127.0.0.1:0", "--max-batch", "8", "--max-queue-delay", "50ms",
           "--preferred-batch", "4"});
  const int port = d.announced_port("serving HTTP on 127.0.0.1:");
  // Four requests of one row at once: they reach the preferred size and run as one pass.
  std::vector<std::future<int>> statuses;
  for (int i = 0; i < 4; ++i)
    statuses.push_back(std::async(std::launch::async, [port] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(20, 0);
      auto r = c.Post("/v2/models/m/infer", request_body(1), "application/json");
      return r && json::parse(r->body)["outputs"][0]["shape"] == json::array({1, 8}) ? r->status
                                                                                     : -1;
    }));
  for (auto& s : statuses)
    CHECK(s.get() == 200);
  httplib::Client c("127.0.0.1", port);
  auto s = samples(c.Get("/metrics")->body);
  CHECK(s.at("warm_batch_rows_sum") == 4);
  CHECK(s.at("warm_batch_rows_count") >= 1);
  CHECK(s.at("warm_batch_rows_count") <= 4);
  CHECK(d.stop() == 0);
  CHECK(d.run_to_exit({"--max-batch", "8", "--preferred-batch", "9"}) ==
        2);  // 9 > 8: a usage error
}
