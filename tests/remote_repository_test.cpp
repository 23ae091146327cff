// Resolving models in remote stores (sources/remote_repository.hpp) and fetching one into a file,
// over an in-memory store: which object a path names, versions chosen by number, what HTTP
// sources probe, paths that try to escape their root, and an object replaced during its fetch.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "sources/remote_repository.hpp"
#include "support/fake_store.hpp"

using namespace warm;
using warm::sources::remote_repository;

namespace {

struct stores {
  std::shared_ptr<test::fake_store> s3 = std::make_shared<test::fake_store>();
  std::shared_ptr<test::fake_store> http = std::make_shared<test::fake_store>();
  remote_repository repository(std::vector<std::string> roots) {
    sources::remote_stores st;
    st.s3 = s3;
    st.http = http;
    auto r = remote_repository::create(roots, st);
    REQUIRE(r);
    return std::move(*r);
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a model directory in S3 resolves to its highest numeric version") {
  stores st;
  for (const char* v : {"1", "2", "10", "latest", "007"})
    st.s3->put(std::string("s3://models/prod/mnist/") + v + "/model.safetensors",
               "weights-" + std::string(v));
  st.s3->put("s3://models/prod/mnist/README", "text");
  auto repo = st.repository({"s3://models/prod"});

  auto highest = repo.resolve("mnist");
  REQUIRE(highest);
  CHECK(highest->version == 10u);  // by number, not by name ("2" > "10" as text)
  CHECK(highest->object.url.to_string() == "s3://models/prod/mnist/10/model.safetensors");
  CHECK(highest->name == "model.safetensors");
  CHECK(highest->object.size == std::string("weights-10").size());

  auto two = repo.resolve("mnist", 2);
  REQUIRE(two);
  CHECK(two->object.url.to_string() == "s3://models/prod/mnist/2/model.safetensors");
  auto dir = repo.resolve("mnist/1");
  REQUIRE(dir);
  CHECK(dir->version == 1u);
  CHECK(repo.resolve("mnist", 3).error().code == errc::not_found);
  CHECK(repo.resolve("mnist", 7).error().code == errc::not_found);  // "007" is no version
  CHECK(repo.resolve("absent").error().code == errc::not_found);
}

TEST_CASE("a model file named by URL is looked at, with the version its directory says") {
  stores st;
  st.s3->put("s3://other/bert/7/model.pt", "module");
  auto repo = st.repository({});
  auto found = repo.resolve("s3://other/bert/7/model.pt");
  REQUIRE(found);
  CHECK(found->version == 7u);
  CHECK(found->name == "model.pt");
  CHECK(found->object.etag == "etag-1");
  CHECK(repo.resolve("s3://other/bert/7/model.pt", 8).error().code == errc::invalid_argument);
  CHECK(repo.resolve("s3://other/bert/8/model.pt").error().code == errc::not_found);
}

TEST_CASE("a version directory holding two model files is refused") {
  stores st;
  st.s3->put("s3://models/m/1/model.safetensors", "a");
  st.s3->put("s3://models/m/1/model.pt", "b");
  auto repo = st.repository({"s3://models"});
  auto r = repo.resolve("m");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_argument);
  CHECK_THAT(r.error().message, Catch::Contains("more than one model file"));
}

TEST_CASE("roots are tried in order; paths may not leave them") {
  stores st;
  st.s3->put("s3://second/m/1/model.safetensors", "x");
  st.s3->put("s3://first/secret/1/model.safetensors", "y");
  auto repo = st.repository({"s3://first/pub", "s3://second"});
  auto r = repo.resolve("m");
  REQUIRE(r);
  CHECK(r->object.url.to_string() == "s3://second/m/1/model.safetensors");
  for (const char* bad : {"../secret", "m/../../first/secret", "/m", "./m", ""}) {
    INFO(bad);
    auto e = repo.resolve(bad);
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::invalid_argument);
  }
}

TEST_CASE("an HTTP source is probed for the model file names in the version asked for") {
  stores st;
  st.http->put("https://files.example/m/3/model.pt", "module");
  auto repo = st.repository({});
  auto dir = repo.resolve("https://files.example/m/3");
  REQUIRE(dir);
  CHECK(dir->name == "model.pt");
  CHECK(dir->version == 3u);
  auto asked = repo.resolve("https://files.example/m", 3);
  REQUIRE(asked);
  CHECK(asked->object.url.to_string() == "https://files.example/m/3/model.pt");
  auto unlisted = repo.resolve("https://files.example/m");
  REQUIRE_FALSE(unlisted);
  CHECK(unlisted.error().code == errc::not_found);
  CHECK_THAT(unlisted.error().message, Catch::Contains("cannot be listed"));
}

TEST_CASE("a source without a store is refused") {
  sources::remote_stores none;
  auto r = remote_repository::create({"s3://models"}, none);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_argument);
}

TEST_CASE("fetch_to_file: an object replaced mid-fetch is fetched again, never mixed") {
  stores st;
  const std::string url = "s3://models/m/1/model.safetensors";
  st.s3->put(url, "AAAAAAAA");
  auto repo = st.repository({});
  char path[] = "/tmp/warm-fetch-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);

  SECTION("replaced with bytes of the same size: fetched again from the start") {
    auto model = *repo.resolve(url);
    st.s3->during_next_fetch([&] { st.s3->put(url, "BBBBBBBB"); });
    auto r = sources::fetch_to_file(repo, model, path, 8);
    REQUIRE(r);
    CHECK_FALSE(r->changed);
    CHECK(read_all(path) == "BBBBBBBB");
    CHECK(model.object.etag == "etag-2");
    CHECK(st.s3->fetches() == 2);
  }
  SECTION("replaced with another size: reported changed, for the caller to reserve again") {
    auto model = *repo.resolve(url);
    st.s3->during_next_fetch([&] { st.s3->put(url, "CCCCCCCCCCCC"); });
    auto r = sources::fetch_to_file(repo, model, path, 8);
    REQUIRE(r);
    CHECK(r->changed);
    CHECK(model.object.size == 12u);
  }
  SECTION("an object that keeps changing fails after 3 tries") {
    auto model = *repo.resolve(url);
    std::function<void()> again = [&] {
      st.s3->put(url, "DDDDDDDD");
      st.s3->during_next_fetch(again);
    };
    st.s3->during_next_fetch(again);
    auto r = sources::fetch_to_file(repo, model, path, 8);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("kept changing"));
    CHECK(st.s3->fetches() == 3);
  }
  SECTION("an unknown entity tag is looked up first") {
    auto model = *repo.resolve(url);
    model.object.etag.clear();
    auto r = sources::fetch_to_file(repo, model, path, 8);
    REQUIRE(r);
    CHECK(read_all(path) == "AAAAAAAA");
    CHECK(model.object.etag == "etag-1");
  }
  unlink(path);
}
