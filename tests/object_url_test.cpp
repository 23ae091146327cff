// Object URLs (sources/object_url.hpp): what parses, how it is shown, and what is refused —
// credentials in URLs, escaping segments, bad buckets and hosts, control bytes.
#include <catch2/catch.hpp>

#include "sources/curl_fetch.hpp"
#include "sources/object_url.hpp"

using namespace warm;
using warm::sources::object_url;
using warm::sources::parse_object_url;

TEST_CASE("s3 and http(s) URLs parse into their parts and show as given") {
  auto s3 = parse_object_url("s3://models/prod/mnist/3/model.safetensors");
  REQUIRE(s3);
  CHECK(s3->kind == object_url::scheme::s3);
  CHECK(s3->bucket == "models");
  CHECK(s3->key == "prod/mnist/3/model.safetensors");
  CHECK(s3->to_string() == "s3://models/prod/mnist/3/model.safetensors");
  auto bucket_only = parse_object_url("S3://my.bucket-1/");
  REQUIRE(bucket_only);
  CHECK(bucket_only->key.empty());
  CHECK(bucket_only->to_string() == "s3://my.bucket-1");

  auto https = parse_object_url("https://Files.Example:8443/models/m/1/model.pt");
  REQUIRE(https);
  CHECK(https->kind == object_url::scheme::https);
  CHECK(https->authority == "files.example:8443");
  CHECK(https->path == "/models/m/1/model.pt");
  CHECK(https->to_string() == "https://files.example:8443/models/m/1/model.pt");
  auto v6 = parse_object_url("http://[::1]:9000/x");
  REQUIRE(v6);
  CHECK(v6->authority == "[::1]:9000");
}

TEST_CASE("child appends below a URL as a directory") {
  auto root = *parse_object_url("s3://models/prod");
  CHECK(root.child("mnist/3").to_string() == "s3://models/prod/mnist/3");
  CHECK(root.child("").to_string() == "s3://models/prod");
  auto bucket = *parse_object_url("s3://models");
  CHECK(bucket.child("m").key == "m");
  auto web = *parse_object_url("http://h:80");
  CHECK(web.child("m/model.pt").path == "/m/model.pt");
  auto deep = *parse_object_url("http://h/a/");
  CHECK(deep.child("b").path == "/a/b");
}

TEST_CASE("is_remote tells URLs from local paths") {
  CHECK(sources::is_remote("s3://b/k"));
  CHECK(sources::is_remote("HTTPS://h/p"));
  CHECK(sources::is_remote("http://h"));
  CHECK_FALSE(sources::is_remote("models/s3://x"));
  CHECK_FALSE(sources::is_remote("/srv/models"));
  CHECK_FALSE(sources::is_remote("ftp://h/p"));
}

TEST_CASE("credentials in a URL are refused without ever being shown") {
  for (const char* url : {"https://user:hunter2@files.example/m/model.pt",
                          "s3://AKIAXYZ:hunter2@bucket/key", "http://hunter2@h/x?q=1"}) {
    INFO(url);
    auto r = parse_object_url(url);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains("user information"));
    CHECK_THAT(r.error().message, !Catch::Contains("hunter2"));
    CHECK_THAT(r.error().message, !Catch::Contains("AKIAXYZ"));
  }
}

TEST_CASE("malformed and escaping URLs are refused, naming what is wrong") {
  struct bad {
    std::string url;
    const char* says;
  };
  for (const auto& b : std::vector<bad>{
           {"ftp://h/p", "not an s3://"},
           {"s3://ab/k", "not a valid bucket"},  // 2 characters
           {"s3://" + std::string(64, 'a') + "/k", "not a valid bucket"},
           {"s3://Upper/k", "not a valid bucket"},
           {"s3://-bucket/k", "not a valid bucket"},
           {"s3://a..b/k", "not a valid bucket"},
           {"s3://bucket/../other/k", "'.' or '..'"},
           {"s3://bucket/a/./b", "'.' or '..'"},
           {"https://h/a/..", "'.' or '..'"},
           {"s3://bucket/a//b", "empty segments"},
           {"https://h/p?x=1", "query or fragment"},
           {"https://h/p#frag", "query or fragment"},
           {"https://h p/x", "space"},
           {"https://h:99999/x", "host[:port]"},
           {"https://h:/x", "host[:port]"},
           {"https:///x", "host[:port]"},
           {"https://h_1/x", "host[:port]"},
           {std::string("s3://bucket/a\0b", 15), "control byte"},
           {"s3://bucket/a\nb", "control byte"},
           {"s3://bucket/" + std::string(4100, 'k'), "longer than 4096"},
       }) {
    INFO(b.url);
    auto r = parse_object_url(b.url);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains(b.says));
  }
}

TEST_CASE("bucket names at their length limits") {
  CHECK(parse_object_url("s3://abc/k"));
  CHECK(parse_object_url("s3://" + std::string(63, 'a') + "/k"));
  CHECK(parse_object_url("s3://1.2-3/k"));
  CHECK_FALSE(parse_object_url("s3://bucket-/k"));
  CHECK_FALSE(parse_object_url("s3://bu_cket/k"));
  CHECK_FALSE(parse_object_url("s3:///k"));
}

TEST_CASE("escapes decode into the key or path, and to_string encodes them back") {
  auto s3 = parse_object_url("s3://models/a%20b/c%2Bd=e%25f");
  REQUIRE(s3);
  CHECK(s3->key == "a b/c+d=e%f");
  CHECK(s3->to_string() == "s3://models/a%20b/c+d=e%25f");
  auto again = parse_object_url(s3->to_string());
  REQUIRE(again);
  CHECK(again->key == s3->key);
  auto web = parse_object_url("http://h/x%3Fy%23z");
  REQUIRE(web);
  CHECK(web->path == "/x?y#z");
  CHECK(web->to_string() == "http://h/x%3Fy%23z");
  object_url listed = *parse_object_url("s3://models");
  listed.key = "odd\tkey";  // as a listing may return it
  CHECK(listed.to_string() == "s3://models/odd%09key");
}

TEST_CASE("escapes that are malformed or escape the prefix are refused") {
  for (const char* url :
       {"s3://bucket/a%2", "s3://bucket/a%zz", "s3://bucket/%", "http://h/a%0Ab",
        "s3://bucket/a%00", "s3://bucket/%2E%2E/x", "http://h/a/%2e", "s3://bucket/a%2F%2Fb"}) {
    INFO(url);
    auto r = parse_object_url(url);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
  }
}

TEST_CASE("request paths are encoded as S3's canonical URI wants") {
  CHECK(sources::encode_path("m/1/model.safetensors") == "m/1/model.safetensors");
  CHECK(sources::encode_path("a b/c+d=e~f_g-h.i") == "a%20b/c%2Bd%3De~f_g-h.i");
  CHECK(sources::encode_path("%/?#&,\xc3\xa9") == "%25/%3F%23%26%2C%C3%A9");
  CHECK(sources::encode_path("") == "");
}
