// warmctl's output formatting (tools/warmctl/format.hpp), tensor values (tensor_values.hpp) and
// infer's --input documents (input_file.hpp): pure functions of warm's value types.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <sstream>

#include "../tools/warmctl/format.hpp"
#include "../tools/warmctl/input_file.hpp"
#include "../tools/warmctl/tensor_values.hpp"

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
  model_event evicted = e;
  evicted.previous = model_state::loaded;
  evicted.state = model_state::not_loaded;
  evicted.reason = "capacity";
  CHECK(event_line(evicted) == "#7 m LOADED -> NOT_LOADED from host (capacity)");
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

namespace {

template <class T>
tensor typed(const std::string& name, dtype type, std::vector<std::uint64_t> shape,
             std::vector<T> values) {
  tensor t{name, type, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

}  // namespace

TEST_CASE("infer results print every dtype's values, not a byte count") {
  infer_result r;
  r.model = "m";
  r.outputs.push_back(typed<std::int64_t>("ids", dtype::i64, {1, 3}, {-7, 0, 9007199254740993}));
  r.outputs.push_back(typed<std::uint8_t>("mask", dtype::boolean, {1, 2}, {1, 0}));
  r.outputs.push_back(
      typed<std::uint16_t>("half", dtype::f16, {2}, {float_to_half(0.5f), float_to_half(-2.0f)}));
  r.outputs.push_back(typed<std::uint16_t>("brain", dtype::bf16, {1}, {float_to_bfloat16(1.5f)}));
  r.outputs.push_back(typed<std::uint64_t>("big", dtype::u64, {1}, {18446744073709551615u}));
  r.outputs.push_back(typed<std::int8_t>("small", dtype::i8, {1}, {-128}));
  r.outputs.push_back(typed<std::uint8_t>("f8", dtype::f8_e4m3, {2}, {0x38, 0xfe}));  // 1.0, -448
  r.outputs.push_back(typed<double>("wide", dtype::f64, {1}, {0.125}));
  auto j = to_json(r);
  CHECK(j["outputs"][0]["data"].dump() == "[-7,0,9007199254740993]");
  CHECK(j["outputs"][1]["data"].dump() == "[true,false]");
  CHECK(j["outputs"][2]["data"].dump() == "[0.5,-2.0]");
  CHECK(j["outputs"][3]["data"].dump() == "[1.5]");
  CHECK(j["outputs"][4]["data"].dump() == "[18446744073709551615]");
  CHECK(j["outputs"][5]["data"].dump() == "[-128]");
  CHECK(j["outputs"][6]["data"].dump() == "[1.0,-448.0]");
  CHECK(j["outputs"][7]["data"].dump() == "[0.125]");
  std::ostringstream out;
  print_infer_result(out, r);
  auto text = out.str();
  CHECK(text.find("ids I64 [1, 3]\n  -7 0 9007199254740993\n") != std::string::npos);
  CHECK(text.find("mask BOOL [1, 2]\n  true false\n") != std::string::npos);
  CHECK(text.find("half F16 [2]\n  0.5000 -2.0000\n") != std::string::npos);
  CHECK(text.find("big U64 [1]\n  18446744073709551615\n") != std::string::npos);
  CHECK(text.find("f8 F8_E4M3 [2]\n  1.0000 -448.0000\n") != std::string::npos);
  CHECK(text.find("bytes") == std::string::npos);
}

TEST_CASE("8-bit floats round to nearest even; E4M3 saturates, E5M2 has infinities") {
  CHECK(f8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(f8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
  CHECK(std::isnan(f8_e4m3_to_float(0x7f)));
  CHECK(float_to_f8_e4m3(1.0f) == 0x38);
  CHECK(float_to_f8_e4m3(1e6f) == 0x7e);
  CHECK(float_to_f8_e4m3(-INFINITY) == 0xfe);
  CHECK(float_to_f8_e4m3(1.0625f) == 0x38);  // halfway between 1 and 1.125: to the even mantissa
  CHECK(float_to_f8_e4m3(std::ldexp(1.0f, -6) * 0.99f) == 0x08);  // rounds up into the normals
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f)
      CHECK(float_to_f8_e4m3(f8_e4m3_to_float(static_cast<std::uint8_t>(b))) == b);
  CHECK(f8_e5m2_to_float(0x3c) == 1.0f);
  CHECK(float_to_f8_e5m2(1e6f) == 0x7c);  // infinity
  CHECK(std::isnan(f8_e5m2_to_float(float_to_f8_e5m2(NAN))));
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) <= 0x7c)
      CHECK(float_to_f8_e5m2(f8_e5m2_to_float(static_cast<std::uint8_t>(b))) == b);
}

TEST_CASE("--input documents: a nested array, one typed object, or a list of named inputs") {
  using nlohmann::json;
  auto nested = parse_input(json::parse("[[1, 2], [3, 4]]"));
  REQUIRE(nested);
  REQUIRE(nested->size() == 1);
  CHECK(nested->front().name.empty());
  CHECK(nested->front().type == dtype::f32);
  CHECK(nested->front().shape == std::vector<std::uint64_t>{2, 2});
  CHECK(element_text(nested->front(), 3) == "4.0000");

  auto ids = parse_input(
      json::parse(R"({"name": "ids", "dtype": "I64", "shape": [1, 3], "data": [[5, -1, 7]]})"));
  REQUIRE(ids);
  CHECK(ids->front().name == "ids");
  CHECK(ids->front().type == dtype::i64);
  CHECK(ids->front().data.size() == 24);
  CHECK(element_json(ids->front(), 1) == -1);

  // A KServe V2 request body: "datatype" and V2's names.
  auto v2 = parse_input(json::parse(R"({"inputs": [
      {"name": "ids", "datatype": "INT64", "shape": [2], "data": [1, 2]},
      {"name": "mask", "datatype": "BOOL", "shape": [2], "data": [true, 0]},
      {"name": "scale", "dtype": "F16", "shape": [1], "data": [0.5]}]})"));
  REQUIRE(v2);
  REQUIRE(v2->size() == 3);
  CHECK((*v2)[1].type == dtype::boolean);
  CHECK(element_text((*v2)[1], 0) == "true");
  CHECK(element_text((*v2)[1], 1) == "false");
  CHECK(element_text((*v2)[2], 0) == "0.5000");

  auto message = [](const char* doc) {
    auto r = parse_input(json::parse(doc));
    return r ? std::string("ok") : r.error().message;
  };
  CHECK(message(R"({"name": "ids", "dtype": "I64", "shape": [1], "data": [1.5]})") ==
        "input 'ids': value 1.5 is not an integer (I64)");
  CHECK(message(R"({"dtype": "I8", "shape": [1], "data": [300]})") ==
        "input: value 300 is not in range (I8)");
  CHECK(message(R"({"dtype": "U8", "shape": [1], "data": [-1]})") ==
        "input: value -1 is not in range (U8)");
  CHECK(message(R"({"dtype": "BOOL", "shape": [1], "data": [2]})") ==
        "input: value 2 is not true, false, 0 or 1 (BOOL)");
  CHECK(message(R"({"dtype": "I64", "shape": [1], "data": [18446744073709551615]})") ==
        "input: value 18446744073709551615 is not in range (I64)");
  CHECK(message(R"({"shape": [1], "data": ["x"]})") == "input: value \"x\" is not a number (F32)");
  CHECK_THAT(message(R"({"dtype": "F128", "shape": [1], "data": [1]})"),
             Catch::StartsWith("input: unknown dtype \"F128\""));
  CHECK(message(R"({"shape": [3], "data": [1, 2]})") ==
        "input: shape holds 3 values but data has 2");
  CHECK(message("[[1, 2], [3]]") == "input is not a rectangular array");
  CHECK(message(R"({"inputs": [1]})") == "\"inputs\" holds a non-object");
}

TEST_CASE("--batch repeats a one-dimensional input as rows and checks a batch's first dimension") {
  auto t = typed<std::int64_t>("ids", dtype::i64, {2}, {4, 5});
  REQUIRE(apply_batch(t, 3));
  CHECK(t.shape == std::vector<std::uint64_t>{3, 2});
  CHECK(element_count(t) == 6);
  CHECK(element_text(t, 4) == "4");
  CHECK(apply_batch(t, 3));
  CHECK(apply_batch(t, 2).error().message ==
        "--batch 2 does not match the first dimension of input 'ids'");
}

TEST_CASE("a remote model's status says where its bytes are; a local one says nothing of it") {
  model_status local;
  local.id = "local";
  auto j = to_json(local);
  CHECK_FALSE(j.contains("source"));
  CHECK_FALSE(j.contains("tier"));
  std::ostringstream local_text;
  print_model_status(local_text, local, "");
  CHECK(local_text.str().find("tier") == std::string::npos);
  CHECK(local_text.str().find("source") == std::string::npos);

  model_status remote;
  remote.id = "r";
  remote.source = "s3://b/r/1/model.safetensors";
  j = to_json(remote);
  CHECK(j["source"] == remote.source);
  CHECK(j["tier"] == json({{"held", false}, {"bytes", 0}}));
  std::ostringstream at_source;
  print_model_status(at_source, remote, "");
  CHECK(at_source.str().find("not held (at the source only)") != std::string::npos);
  remote.in_tier = true;
  remote.tier_bytes = 2048;
  j = to_json(remote);
  CHECK(j["tier"] == json({{"held", true}, {"bytes", 2048}}));
  std::ostringstream held;
  print_model_status(held, remote, "");
  CHECK(held.str().find("held, 2.00 KiB (2048 bytes)") != std::string::npos);
  CHECK(held.str().find(remote.source) != std::string::npos);
}

TEST_CASE("inspect tier: totals, then each file with its models; not open when none") {
  inspection s;
  std::ostringstream closed;
  print_inspection(closed, s, "tier");
  CHECK(closed.str() == "disk tier: not open (no remote model met yet)\n");
  std::ostringstream summary;
  print_inspection(summary, s, "");
  CHECK(summary.str().find("disk tier") == std::string::npos);  // no tier: not in the summary

  s.tier.open = true;
  s.tier.dir = "/t";
  s.tier.capacity = 4096;
  s.tier.used = 2048;
  s.tier.files = 1;
  s.tier.hits = 3;
  s.tier.misses = 1;
  s.tier.fetches = 1;
  s.tier.fetch_bytes = 2048;
  s.tier.fetch_seconds = 0.5;
  s.tier.held.push_back({"s3://b/m", 2048, {"a", "b"}});
  std::ostringstream text;
  print_inspection(text, s, "tier");
  CHECK(text.str().find("disk tier /t: 2.00 KiB of 4.00 KiB used (2048 of 4096 bytes, 0 reserved), "
                        "1 files\n") == 0);
  CHECK(text.str().find("hits 3, misses 1, evictions 0; fetches 1 ok, 0 failed, 2.00 KiB (2048 "
                        "bytes) in 0.50s\n") != std::string::npos);
  CHECK(text.str().find("s3://b/m") != std::string::npos);
  CHECK(text.str().find("a,b") != std::string::npos);
  auto j = inspection_section(s, "tier");
  REQUIRE(j.contains("tier"));
  CHECK(j["tier"]["fetches"] == json({{"ok", 1}, {"failed", 0}}));
  CHECK(j["tier"]["held"][0]["models"] == json({"a", "b"}));
  CHECK(j["tier"]["capacity"] == 4096);
  CHECK(to_json(s)["tier"]["hits"] == 3);
}

TEST_CASE("a model's status in a cluster names the instances whose disk tier holds its file") {
  cluster_info c;
  c.enabled = true;
  cluster_instance a, b;
  a.name = "i1";
  a.residents = {"m"};
  b.name = "i2";
  b.tiered = {"m", "n"};
  c.instances = {a, b};
  auto where = copies_of(c, "m");
  CHECK(where.copies == std::vector<std::string>{"i1"});
  CHECK(where.tiered == std::vector<std::string>{"i2"});
  model_status st;
  st.id = "m";
  CHECK(to_json(st, where)["tiered_on"] == json({"i2"}));
  std::ostringstream text;
  print_copies(text, where);
  CHECK(text.str().find("disk tiers: 1 (i2)\n") != std::string::npos);
  std::ostringstream none;
  print_copies(none, copies_of(c, "z"));
  CHECK(none.str().find("disk tiers") == std::string::npos);
  CHECK(to_json(c)["instances"][1]["tiered"] == json({"m", "n"}));
}
