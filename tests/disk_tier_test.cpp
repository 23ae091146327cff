// The disk tier (sources/disk_tier.hpp) on a real directory: files written, committed, found and
// evicted under the budget; pins and writes in flight kept; what a crash leaves removed at open.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sources/disk_tier.hpp"

using namespace std::chrono_literals;
using namespace warm;
using namespace warm::sources;
namespace fs = std::filesystem;

namespace {

struct tier_dir {
  std::string path;
  manual_clock time;
  tier_dir() {
    char templ[] = "/tmp/warm-tier-XXXXXX";
    path = mkdtemp(templ);
  }
  ~tier_dir() { fs::remove_all(path); }
  std::string dir() const { return path + "/tier"; }
  disk_tier open(std::uint64_t capacity, const std::string& policy = "lru") {
    auto t = disk_tier::open(dir(), capacity, policy, time);
    REQUIRE(t);
    return std::move(*t);
  }
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reserves, writes `bytes` of `fill`, commits.
tier_file store(disk_tier& t, const std::string& key, std::uint64_t bytes, char fill = 'x',
                const std::string& etag = "e1") {
  auto r = t.reserve(key, "model.safetensors", bytes);
  REQUIRE(r);
  write_file(r->temp_path, std::string(bytes, fill));
  auto c = t.commit(std::move(*r), etag, 0.5);
  REQUIRE(c);
  return *c;
}

}  // namespace

TEST_CASE("a file written, committed and found again, confined to the tier") {
  tier_dir d;
  auto t = d.open(1000);
  auto r = t.reserve("s3://b/m/1/model.safetensors", "model.safetensors", 10);
  REQUIRE(r);
  CHECK(r->temp_path.rfind(d.dir() + "/incoming/", 0) == 0);
  CHECK_FALSE(t.find("s3://b/m/1/model.safetensors", ""));  // nothing until committed
  write_file(r->temp_path, "0123456789");
  auto c = t.commit(std::move(*r), "tag-1", 1.25);
  REQUIRE(c);
  CHECK(c->path.rfind(d.dir() + "/objects/", 0) == 0);
  CHECK(fs::path(c->path).filename() == "model.safetensors");
  CHECK(read_all(c->path) == "0123456789");
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  auto f = t.find("s3://b/m/1/model.safetensors", "tag-1");
  REQUIRE(f);
  CHECK(f->path == c->path);
  CHECK(f->etag == "tag-1");
  CHECK(f->fetch_seconds == 1.25);
  auto s = t.stats();
  CHECK(s.used == 10);
  CHECK(s.files == 1);
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
}

TEST_CASE("the budget: exactly full fits, one byte more evicts the policy's victim") {
  tier_dir d;
  auto t = d.open(30);
  store(t, "a", 10);
  d.time.advance(1s);
  store(t, "b", 10);
  d.time.advance(1s);
  store(t, "c", 10);  // 30 of 30: nothing evicted
  CHECK(t.stats().evictions == 0);
  d.time.advance(1s);
  REQUIRE(t.find("a", ""));  // a is now the most recently used: b goes first
  d.time.advance(1s);
  store(t, "d", 1);
  CHECK(t.stats().evictions == 1);
  CHECK_FALSE(t.find("b", ""));
  CHECK(t.find("a", ""));
  CHECK(t.find("c", ""));
  CHECK(t.stats().used == 21);
  auto too_big = t.reserve("e", "model.pt", 31);
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().code == errc::model_too_large);
}

TEST_CASE("pins and writes in flight are never evicted") {
  tier_dir d;
  auto t = d.open(20);
  store(t, "a", 10);
  store(t, "b", 10);
  t.pin("a");
  t.pin("b");
  auto refused = t.reserve("c", "model.safetensors", 5);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::capacity_exhausted);
  t.unpin("b");
  auto taken = t.reserve("c", "model.safetensors", 5);  // evicts b, the only unpinned one
  REQUIRE(taken);
  CHECK_FALSE(t.find("b", ""));
  CHECK(t.find("a", ""));
  // c's reservation counts: 10 (a) + 5 (c, in flight) of 20; another 6 finds no room.
  auto blocked = t.reserve("e", "model.safetensors", 6);
  REQUIRE_FALSE(blocked);
  CHECK(blocked.error().code == errc::capacity_exhausted);
  t.abort(std::move(*taken));
  CHECK(t.stats().reserved == 0);
  CHECK(fs::is_empty(d.dir() + "/incoming"));
}

TEST_CASE("a stale entity tag removes the copy; a short write is not committed") {
  tier_dir d;
  auto t = d.open(100);
  auto old = store(t, "k", 10, 'o', "v1");
  CHECK_FALSE(t.find("k", "v2"));
  CHECK_FALSE(fs::exists(old.path));
  CHECK(t.stats().files == 0);

  auto r = t.reserve("k", "model.safetensors", 10);
  REQUIRE(r);
  write_file(r->temp_path, "short");
  auto c = t.commit(std::move(*r), "v2", 0.1);
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error().message, Catch::Contains("5 bytes were written of 10"));
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  CHECK(t.stats().reserved == 0);
  CHECK_FALSE(t.find("k", ""));
  auto bad_name = t.reserve("k", "../escape", 1);
  REQUIRE_FALSE(bad_name);
  CHECK(bad_name.error().code == errc::invalid_argument);
}

TEST_CASE("open keeps complete entries and removes what a crash left, touching nothing outside") {
  tier_dir d;
  std::string kept_path;
  {
    auto t = d.open(1000);
    kept_path = store(t, "s3://b/kept", 10, 'k', "etag-k").path;
    auto lying = store(t, "s3://b/lying", 10, 'l');
    write_file(lying.path, "longer than the record says");
    auto no_record = store(t, "s3://b/norecord", 10, 'n');
    fs::remove(fs::path(no_record.path).parent_path() / "entry.json");
    auto pending = t.reserve("s3://b/pending", "model.safetensors", 10);  // a write cut short
    REQUIRE(pending);
    write_file(pending->temp_path, "half");
  }
  const auto outside = d.path + "/outside.txt";
  write_file(outside, "precious");
  fs::create_directory(d.dir() + "/objects/0123456789abcdef0123456789abcdef");
  fs::create_symlink(outside, d.dir() + "/objects/0123456789abcdef0123456789abcdef/model.pt");
  fs::create_symlink(outside, d.dir() + "/objects/link");

  auto t = d.open(1000);
  CHECK(t.stats().removed_at_open == 5);  // the half write, the lying and record-less entries,
                                          // and the two planted links
  CHECK(t.stats().files == 1);
  auto kept = t.find("s3://b/kept", "etag-k");
  REQUIRE(kept);
  CHECK(kept->path == kept_path);
  CHECK(kept->fetch_seconds == 0.5);
  CHECK(read_all(outside) == "precious");
  CHECK(fs::is_empty(d.dir() + "/incoming"));
}

TEST_CASE("a smaller budget at open evicts; a symbolic link for the directory is refused") {
  tier_dir d;
  {
    auto t = d.open(100);
    store(t, "a", 40);
    d.time.advance(1s);
    store(t, "b", 40);
  }
  {
    auto t = d.open(50);
    CHECK(t.stats().files == 1);
    CHECK(t.stats().used == 40);
  }
  fs::create_directory_symlink(d.dir(), d.path + "/link");
  auto linked = disk_tier::open(d.path + "/link", 100, "lru", d.time);
  REQUIRE_FALSE(linked);
  CHECK(linked.error().code == errc::invalid_argument);
  CHECK_FALSE(disk_tier::open(d.dir(), 0, "lru", d.time));
  CHECK_FALSE(disk_tier::open(d.dir(), 100, "no-such-policy", d.time));
}
