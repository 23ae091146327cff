// The safetensors reader: valid files of several shapes and a catalogue of malformed ones, each
// rejected with its own specific error (never a crash or a huge allocation).
#include <catch2/catch.hpp>

#include "support/test_files.hpp"
#include "warm/model_writer.hpp"
#include "warm/safetensors.hpp"

using nlohmann::json;
using warm::test::f32;
using warm::test::image;
using warm::test::json_image;

namespace {

std::string length_prefix(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("valid files of several shapes parse with exact layout") {
  for (auto widths : std::vector<std::vector<std::uint64_t>>{
           {1, 1}, {784, 512, 10}, {3, 5, 7, 2}, {64, 64, 64, 64, 64}}) {
    auto bytes = warm::dense_model_bytes({widths, warm::activation::gelu, 3});
    REQUIRE(bytes);
    auto header = warm::parse_safetensors(*bytes);
    REQUIRE(header);
    CHECK(header->tensors.size() == 2 * (widths.size() - 1));
    CHECK(header->data_offset % 8 == 0);
    CHECK(header->data_bytes == warm::dense_data_bytes(widths));
    CHECK(header->metadata.at("warm.kind") == "dense");
    std::uint64_t cursor = 0;
    for (const auto& t : header->tensors) {  // sorted by offset, tiling the buffer
      CHECK(t.begin == cursor);
      cursor = t.end;
    }
    CHECK(cursor == header->data_bytes);
    auto* w = header->find("layers.0.weight");
    REQUIRE(w);
    CHECK(w->shape == std::vector<std::uint64_t>{widths[1], widths[0]});
  }
}

TEST_CASE("all dtypes, scalars, empty tensors and header padding are accepted") {
  json header{{"a", {{"dtype", "BF16"}, {"shape", {3}}, {"data_offsets", {0, 6}}}},
              {"b", {{"dtype", "I64"}, {"shape", json::array()}, {"data_offsets", {6, 14}}}},
              {"c", {{"dtype", "BOOL"}, {"shape", {0, 4}}, {"data_offsets", {14, 14}}}},
              {"d", {{"dtype", "F8_E4M3"}, {"shape", {2}}, {"data_offsets", {14, 16}}}}};
  auto parsed = warm::parse_safetensors(image(header.dump() + "      ", 16));
  REQUIRE(parsed);
  CHECK(parsed->tensors.size() == 4);
  CHECK(parsed->find("b")->elements() == 1);
  CHECK(parsed->metadata.empty());
}

TEST_CASE("an empty header with an empty buffer is a valid (empty) file") {
  auto parsed = warm::parse_safetensors(image("{}", 0));
  REQUIRE(parsed);
  CHECK(parsed->tensors.empty());
}

TEST_CASE("malformed files are rejected with a specific error") {
  const json one = {{"t", f32({2, 2}, 0)}};
  struct bad_case {
    const char* what;
    std::string bytes;
    const char* error;
  };
  std::vector<bad_case> cases = {
      {"empty file", "", "too short for the 8-byte header length"},
      {"truncated length prefix", std::string("\x10\x00\x00", 3),
       "too short for the 8-byte header length"},
      {"header length past EOF", length_prefix(4096) + "{}", "runs past the end of the"},
      {"header length over 100 MB", length_prefix(100'000'001) + "{}",
       "exceeds the 100000000-byte limit"},
      {"huge header length", length_prefix(~0ull) + "{}", "exceeds the 100000000-byte limit"},
      {"truncated header", image(one.dump(), 16).substr(0, 20), "runs past the end of the"},
      {"bad JSON", image("{\"t\": {\"dtype\": ", 0), "not valid JSON"},
      {"JSON not an object", image("[1, 2, 3]", 0), "not a JSON object"},
      {"invalid UTF-8", image("{\"\xff\xfe\": 1}", 0), "not valid JSON"},
      {"deep nesting", image(std::string(5000, '[') + std::string(5000, ']'), 0), "nesting deeper"},
      {"duplicate tensor name",
       image(
           R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "duplicate key 't'"},
      {"duplicate field",
       image(R"({"t":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4),
       "duplicate key 'dtype'"},
      {"unknown dtype",
       json_image(json{{"t", {{"dtype", "F42"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}}, 4),
       "unknown dtype 'F42'"},
      {"missing dtype", json_image(json{{"t", {{"shape", {1}}, {"data_offsets", {0, 4}}}}}, 4),
       "missing dtype"},
      {"missing shape", json_image(json{{"t", {{"dtype", "F32"}, {"data_offsets", {0, 4}}}}}, 4),
       "missing shape"},
      {"missing offsets", json_image(json{{"t", {{"dtype", "F32"}, {"shape", {1}}}}}, 4),
       "missing data_offsets"},
      {"unknown field",
       json_image(
           json{{"t", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}, {"x", 1}}}}, 4),
       "unknown field 'x'"},
      {"negative dimension",
       json_image(json{{"t", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}}}}, 4),
       "not a non-negative integer"},
      {"fractional dimension",
       json_image(json{{"t", {{"dtype", "F32"}, {"shape", {1.5}}, {"data_offsets", {0, 4}}}}}, 4),
       "not a non-negative integer"},
      {"shape size overflow",
       json_image(
           json{
               {"t",
                {{"dtype", "F64"}, {"shape", {1ull << 40, 1ull << 40}}, {"data_offsets", {0, 4}}}}},
           4),
       "overflows"},
      {"shape-size mismatch",
       json_image(json{{"t", f32({3}, 0)},
                       {"u", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {12, 16}}}}},
                  16),
       "need 8 bytes but data_offsets span 4"},
      {"offsets reversed",
       json_image(json{{"t", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 4}}}}}, 8),
       "end before they begin"},
      {"offsets not a pair",
       json_image(json{{"t", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4, 8}}}}}, 4),
       "is not [begin, end]"},
      {"offsets out of bounds", json_image(json{{"t", f32({4}, 0)}}, 8),
       "past the 8-byte data buffer"},
      {"offsets one byte out of bounds",
       json_image(json{{"t", {{"dtype", "U8"}, {"shape", {9}}, {"data_offsets", {0, 9}}}}}, 8),
       "data_offsets end at 9, past the 8-byte data buffer"},
      {"overlapping tensors", json_image(json{{"a", f32({2}, 0)}, {"b", f32({2}, 4)}}, 12),
       "'b' overlaps tensor 'a'"},
      {"gap between tensors", json_image(json{{"a", f32({1}, 0)}, {"b", f32({1}, 8)}}, 12),
       "gap of 4 bytes before tensor 'b'"},
      {"gap at the start", json_image(json{{"a", f32({1}, 4)}}, 8),
       "gap of 4 bytes before tensor 'a'"},
      {"trailing bytes", json_image(json{{"a", f32({1}, 0)}}, 12), "8 trailing bytes not covered"},
      {"metadata not strings", json_image(json{{"__metadata__", {{"k", 1}}}}, 0),
       "__metadata__ value of 'k' is not a string"},
      {"metadata not an object", json_image(json{{"__metadata__", "x"}}, 0),
       "__metadata__ must be an object"},
      {"tensor entry not an object", json_image(json{{"t", 5}}, 0), "entry is not an object"},
  };
  REQUIRE(cases.size() >= 15);
  for (const auto& c : cases) {
    INFO(c.what);
    auto parsed = warm::parse_safetensors(c.bytes);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == warm::errc::invalid_argument);
    CHECK_THAT(parsed.error().message, Catch::Contains(c.error));
  }
}

// The boundary of the length check: a header may end exactly at the end of the file (no data), but
// not one byte past it. An off-by-eight check (comparing against the size, not size - 8) accepts
// the second file.
TEST_CASE("the header length may reach the end of the file, not one byte past it") {
  const std::string header = "{}";
  auto exact = length_prefix(header.size()) + header;
  auto parsed = warm::parse_safetensors(exact);
  REQUIRE(parsed);
  CHECK(parsed->data_bytes == 0);
  for (std::uint64_t past = 1; past <= 8; ++past) {
    INFO(past);
    auto over = warm::parse_safetensors(length_prefix(header.size() + past) + header);
    REQUIRE_FALSE(over);
    CHECK_THAT(over.error().message, Catch::Contains("runs past the end of the"));
  }
}

// Errors about a file that is not safetensors never show its bytes: a client that got a path to
// name another file (or a JSON parser quoting what it read) must learn nothing of its content.
TEST_CASE("errors never echo the bytes of a file that is not a model") {
  const std::string secret = "root:*:20000:0:99999:7:::\nsecret-token-0123456789\n";
  std::uint64_t prefix = 0;
  for (int i = 7; i >= 0; --i)
    prefix = (prefix << 8) | static_cast<unsigned char>(secret[i]);
  const std::string text = "{\"t\": hunter2-password}";
  auto bad_json = length_prefix(text.size()) + text;
  for (const auto& bytes : {secret, bad_json}) {
    auto parsed = warm::parse_safetensors(bytes);
    REQUIRE_FALSE(parsed);
    INFO(parsed.error().message);
    CHECK_THAT(parsed.error().message,
               !Catch::Contains(std::to_string(prefix)) && !Catch::Contains("root") &&
                   !Catch::Contains("hunter2") && !Catch::Contains("secret"));
  }
}

TEST_CASE("reading from disk names the file and reads only the header") {
  warm::test::temp_dir dir;
  auto good = dir / "good.safetensors";
  auto bytes = warm::dense_model_bytes({{4, 3}, warm::activation::none, 1});
  REQUIRE(bytes);
  warm::test::write_file(good, *bytes);
  auto header = warm::read_safetensors_header(good);
  REQUIRE(header);
  CHECK(header->tensors.size() == 2);

  auto bad = dir / "bad.safetensors";
  warm::test::write_file(bad, length_prefix(1ull << 40));
  auto rejected = warm::read_safetensors_header(bad);
  REQUIRE_FALSE(rejected);
  CHECK_THAT(rejected.error().message, Catch::StartsWith(bad) && Catch::Contains("exceeds"));

  auto missing = warm::read_safetensors_header(dir / "nope.safetensors");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == warm::errc::not_found);

  auto directory = warm::read_safetensors_header(dir.path());
  REQUIRE_FALSE(directory);
  CHECK_THAT(directory.error().message, Catch::Contains("not a regular file"));
}
