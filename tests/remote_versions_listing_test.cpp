// The versions of model directories in S3 (sources/remote_versions.hpp), from listings: what is
// a version (the rules of the disk's look_at_versions), listings of several pages, junk and
// hostile keys, the identity a replaced object gets, relative paths against remote roots, and
// a store that fails.
#include <catch2/catch.hpp>

#include "sources/remote_versions.hpp"
#include "support/fake_store.hpp"

using namespace warm;
using namespace warm::sources;

namespace {

object_info object(const std::string& url, std::uint64_t size = 10, std::string etag = "e") {
  object_info o;
  o.url = *parse_object_url(url);
  o.size = size;
  o.etag = std::move(etag);
  return o;
}

std::vector<std::uint64_t> numbers(const std::vector<remote_version>& versions) {
  std::vector<std::uint64_t> out;
  for (const auto& v : versions)
    out.push_back(v.version);
  return out;
}

const object_url dir = *parse_object_url("s3://models/prod/mnist");

// A store whose listings fail with a given error (a 403, a 503) while `failing`; else the fake's.
class failing_store final : public object_store {
 public:
  test::fake_store objects;
  std::optional<error> failing;
  expected<std::vector<object_info>> list(const object_url& prefix) override {
    if (failing) return *failing;
    return objects.list(prefix);
  }
  expected<object_info> head(const object_url& url) override { return objects.head(url); }
  expected<fetch_stats> fetch(const object_info& o, const fetch_sink& sink,
                              const fetch_options& options) override {
    return objects.fetch(o, sink, options);
  }
};

}  // namespace

TEST_CASE("a listing's versions: numeric directories holding one model file, by number") {
  std::vector<object_info> listing{
      object("s3://models/prod/mnist/10/model.safetensors"),
      object("s3://models/prod/mnist/2/model.pt"),
      object("s3://models/prod/mnist/1/model.safetensors"),
      object("s3://models/prod/mnist/007/model.safetensors"),  // not a version's name
      object("s3://models/prod/mnist/0/model.safetensors"),    // nor is 0
      object("s3://models/prod/mnist/latest/model.safetensors"),
      object("s3://models/prod/mnist/3/weights.bin"),  // no model file
      object("s3://models/prod/mnist/4/model.safetensors.tmp"),
      object("s3://models/prod/mnist/5/sub/model.safetensors"),  // deeper
      object("s3://models/prod/mnist/6/model.safetensors"),      // both files: not a version
      object("s3://models/prod/mnist/6/model.pt"),
      object("s3://models/prod/mnist/model.safetensors"),     // in the model directory itself
      object("s3://models/prod/mnist2/7/model.safetensors"),  // another directory's
      object("s3://models/prod/README"),
      object("s3://elsewhere/prod/mnist/8/model.safetensors"),                 // another bucket's
      object("s3://models/prod/mnist/1234567890123456789/model.safetensors"),  // 19 digits
  };
  auto found = versions_in_listing(dir, listing);
  REQUIRE(found);
  CHECK(numbers(*found) == std::vector<std::uint64_t>{1, 2, 10});
  CHECK((*found)[1].object.url.to_string() == "s3://models/prod/mnist/2/model.pt");
  CHECK((*found)[2].object.url.to_string() == "s3://models/prod/mnist/10/model.safetensors");

  // The same with a trailing '/' on the directory.
  auto slashed = dir;
  slashed.key += '/';
  auto again = versions_in_listing(slashed, listing);
  REQUIRE(again);
  CHECK(numbers(*again) == std::vector<std::uint64_t>{1, 2, 10});
}

TEST_CASE("a listing of several pages, in any order and with a key repeated, is one listing") {
  std::vector<object_info> first, second;
  for (int v = 1; v <= 1000; ++v)
    (v % 2 ? first : second)
        .push_back(object("s3://models/prod/mnist/" + std::to_string(v) + "/model.safetensors"));
  second.push_back(first.back());  // a key at a page boundary answered on both pages
  auto listing = second;
  listing.insert(listing.end(), first.begin(), first.end());
  auto found = versions_in_listing(dir, listing);
  REQUIRE(found);
  REQUIRE(found->size() == 1000);
  CHECK(found->front().version == 1);
  CHECK(found->back().version == 1000);
}

TEST_CASE("a listing is untrusted: over-long keys are passed over, a huge listing refused") {
  std::vector<object_info> listing{object("s3://models/prod/mnist/1/model.safetensors")};
  auto long_key = "s3://models/prod/mnist/" + std::string(1000, '9') + "/model.safetensors";
  auto parsed = parse_object_url(long_key);
  if (parsed) {  // a key S3 itself would refuse: never a version
    object_info o;
    o.url = *parsed;
    listing.push_back(o);
  }
  auto found = versions_in_listing(dir, listing);
  REQUIRE(found);
  CHECK(numbers(*found) == std::vector<std::uint64_t>{1});

  std::vector<object_info> huge(max_listed_objects + 1,
                                object("s3://models/prod/mnist/1/model.safetensors"));
  CHECK(versions_in_listing(dir, huge).error().code == errc::invalid_argument);
  CHECK(models_in_listing(*parse_object_url("s3://models/prod"), huge).error().code ==
        errc::invalid_argument);
}

TEST_CASE("a repository root's model directories are those holding a version") {
  std::vector<object_info> listing{
      object("s3://models/prod/mnist/1/model.safetensors"),
      object("s3://models/prod/bert/3/model.pt"),
      object("s3://models/prod/bert/4/model.pt"),
      object("s3://models/prod/empty/README"),
      object("s3://models/prod/draft/007/model.safetensors"),
      object("s3://models/prod/both/1/model.safetensors"),
      object("s3://models/prod/both/1/model.pt"),
      object("s3://models/prod/model.safetensors"),
      object("s3://models/prodigal/x/1/model.safetensors"),  // shares the prefix's text only
  };
  auto models = models_in_listing(*parse_object_url("s3://models/prod"), listing);
  REQUIRE(models);
  CHECK(*models == std::vector<std::string>{"bert", "mnist"});
  auto bucket = models_in_listing(*parse_object_url("s3://models"), listing);
  REQUIRE(bucket);
  CHECK(bucket->empty());  // "prod/mnist/1/..." is a level deeper than a model directory
}

TEST_CASE("a version's identity is its object's URL, size and entity tag") {
  remote_version v{3, object("s3://models/prod/mnist/3/model.safetensors", 100, "abc")};
  auto f = as_version_file(v);
  CHECK(f.version == 3);
  CHECK(f.path == "s3://models/prod/mnist/3/model.safetensors");
  CHECK(f.size == 100);
  CHECK(f.mtime_ns == 0);  // settled at its first look
  CHECK(f.same_file(as_version_file(v)));
  auto replaced = v;
  replaced.object.etag = "abd";
  CHECK(!f.same_file(as_version_file(replaced)));
  auto resized = v;
  resized.object.size = 101;
  CHECK(!f.same_file(as_version_file(resized)));
}

TEST_CASE("looking at a model directory in a store: found, empty, absent, failing") {
  auto store = std::make_shared<failing_store>();
  store->objects.put("s3://models/prod/mnist/1/model.safetensors", "one");
  store->objects.put("s3://models/prod/mnist/2/model.safetensors", "two");
  store->objects.put("s3://models/prod/empty/notes.txt", "text");
  store->objects.put("s3://models/prod/mnist2/9/model.safetensors", "nine");

  auto look = look_at_remote_versions(*store, dir);
  REQUIRE(look);
  REQUIRE(look->size() == 2);  // mnist2's version is not mnist's
  CHECK((*look)[0].version == 1);
  CHECK((*look)[1].size == 3);

  auto empty = look_at_remote_versions(*store, *parse_object_url("s3://models/prod/empty"));
  REQUIRE(empty);
  CHECK(empty->empty());  // a directory with no version: everything in it retires
  CHECK(
      look_at_remote_versions(*store, *parse_object_url("s3://models/prod/absent")).error().code ==
      errc::not_found);  // nothing there at all: what serves stays

  store->failing = make_error(errc::unavailable, "503 SlowDown");
  CHECK(look_at_remote_versions(*store, dir).error().code == errc::unavailable);
  store->failing = make_error(errc::load_failed, "403 AccessDenied");
  CHECK(look_at_remote_versions(*store, dir).error().code == errc::load_failed);
}

TEST_CASE("a served model's base path: an S3 URL, or relative to the S3 roots in order") {
  auto s3 = std::make_shared<test::fake_store>();
  auto http = std::make_shared<test::fake_store>();
  s3->put("s3://first/models/mnist/1/model.safetensors", "one");
  s3->put("s3://second/models/mnist/5/model.safetensors", "five");
  s3->put("s3://second/models/bert/2/model.pt", "two");
  remote_stores stores;
  stores.s3 = s3;
  stores.http = http;
  auto repo = remote_repository::create(
      {"https://files.example/models", "s3://first/models", "s3://second/models"}, stores);
  REQUIRE(repo);

  auto mnist = look_at_remote_versions(*repo, "mnist");
  REQUIRE(mnist);
  REQUIRE(mnist->size() == 1);
  CHECK(mnist->front().path == "s3://first/models/mnist/1/model.safetensors");  // the first root
  auto bert = look_at_remote_versions(*repo, "bert");
  REQUIRE(bert);
  CHECK(bert->front().version == 2);
  auto url = look_at_remote_versions(*repo, "s3://second/models/mnist");
  REQUIRE(url);
  CHECK(url->front().version == 5);

  CHECK(look_at_remote_versions(*repo, "absent").error().code == errc::not_found);
  CHECK(look_at_remote_versions(*repo, "../escape").error().code == errc::invalid_argument);
  CHECK(look_at_remote_versions(*repo, "/abs").error().code == errc::invalid_argument);
  auto web = look_at_remote_versions(*repo, "https://files.example/models/mnist");
  REQUIRE(!web);
  CHECK(web.error().code == errc::invalid_argument);
  CHECK(web.error().message.find("cannot be listed") != std::string::npos);

  auto only_http = remote_repository::create({"https://files.example/models"}, stores);
  REQUIRE(only_http);
  CHECK(look_at_remote_versions(*only_http, "mnist").error().code == errc::not_found);

  auto models = remote_repository_models(*s3, *parse_object_url("s3://second/models"));
  REQUIRE(models);
  CHECK(*models == std::vector<std::string>{"bert", "mnist"});
  CHECK(remote_repository_models(*http, *parse_object_url("https://files.example/models"))
            .error()
            .code == errc::invalid_argument);
}
