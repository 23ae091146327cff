// warmctl's output formatting (tools/warmctl/format.hpp): pure functions of warm's value types.
#include <catch2/catch.hpp>

#include <cstring>
#include <sstream>

#include "../tools/warmctl/format.hpp"

using namespace warm;
using namespace warm::ctl;

TEST_CASE("table pads every column but the last to its widest cell") {
  table t({"ID", "STATE"});
  t.add({"a-long-id", "LOADED"});
  t.add({"b", "NOT_LOADED"});
  std::ostringstream out;
  t.print(out);
  CHECK(out.str() == "ID         STATE\na-long-id  LOADED\nb          NOT_LOADED\n");
}

TEST_CASE("model status JSON uses warm's names and null for no error") {
  model_status s;
  s.id = "m";
  s.state = model_state::loading_failed;
  s.loads.variance_ms2 = 4;
  auto j = to_json(s);
  CHECK(j["id"] == "m");
  CHECK(j["state"] == "LOADING_FAILED");
  CHECK(j["loads"]["stddev_ms"] == 2.0);
  CHECK(j["last_error"].is_null());
  s.last_error = make_error(errc::load_failed, "disk on fire");
  CHECK(to_json(s)["last_error"]["code"] == "load_failed");
}

TEST_CASE("infer results print F32 outputs as numbers") {
  infer_result r;
  r.model = "m";
  tensor t;
  t.name = "output";
  t.shape = {1, 2};
  float values[2] = {0.5f, -1.0f};
  t.data.resize(sizeof values);
  std::memcpy(t.data.data(), values, sizeof values);
  r.outputs.push_back(t);
  auto j = to_json(r);
  CHECK(j["outputs"][0]["data"].dump() == "[0.5,-1.0]");
  std::ostringstream out;
  print_infer_result(out, r);
  CHECK(out.str().find("output F32 [1, 2]\n  0.5000 -1.0000\n") != std::string::npos);
}

TEST_CASE("inspection sections hold only their part") {
  inspection s;
  s.devices.push_back({"host", "kdf", 100, 10, 0, 1, 0, {{"m", 10, 0, 3, 1.5}}, "", 0});
  s.queue.push_back({"q", true, 12, 1, 3});
  s.failures.push_back({"f", "host", make_error(errc::load_failed, "bad"), 1, 9});
  CHECK(inspection_section(s, "devices")["devices"][0]["resident_count"] == 1);
  CHECK(inspection_section(s, "cache")["devices"][0]["resident"][0]["model"] == "m");
  CHECK(inspection_section(s, "queue")["queue"][0]["waiting"] == true);
  CHECK(inspection_section(s, "queue")["queue"][0]["waiters"] == 3);
  CHECK(inspection_section(s, "failures")["failures"][0]["expires_in_seconds"] == 9.0);
  CHECK(inspection_section(s, "")["devices"].size() == 1);
  std::ostringstream out;
  print_inspection(out, s, "failures");
  CHECK(out.str().find("f      host    load_failed") != std::string::npos);
  std::ostringstream queue;
  print_inspection(queue, s, "queue");
  CHECK(queue.str().find("WAITERS") != std::string::npos);
}

TEST_CASE("event lines name the transition, device and error") {
  model_event e;
  e.model = "m";
  e.previous = model_state::loading;
  e.state = model_state::loaded;
  e.device = "host";
  e.sequence = 7;
  CHECK(event_line(e) == "#7 m LOADING -> LOADED on host");
}

TEST_CASE("--json output survives a message that is not UTF-8: bad bytes become U+FFFD") {
  model_status s;
  s.id = "m";
  s.state = model_state::loading_failed;
  s.last_error = warm::error{errc::load_failed, "cannot open repo/\xff\xfe.safetensors"};
  std::string text;
  REQUIRE_NOTHROW(text = dump_json(to_json(s), 2));
  CHECK(text.find("repo/\xEF\xBF\xBD\xEF\xBF\xBD.safetensors") != std::string::npos);
  CHECK(dump_json(to_json(*s.last_error)).find("\xEF\xBF\xBD") != std::string::npos);
}
