// The disk tier (sources/disk_tier.hpp) on a real directory: files written, committed, found and
// evicted under the budget in the policy's order; pins and writes in flight kept; stale copies
// and short writes refused; what a crash (or a hostile hand) leaves in DIR removed at open without
// touching anything outside it; reservations used twice or changed refused.
//
// WARM_TIER_SMALL_FS: a directory on a small file system of its own (e.g. a tmpfs of 1 MiB) that
// the test may fill; when set, a full disk at commit is tested too.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sources/disk_tier.hpp"

using namespace std::chrono_literals;
using namespace warm;
using namespace warm::sources;
namespace fs = std::filesystem;

namespace {

// A temporary directory of its own per test (removed after), the tier in DIR = <it>/tier.
struct tier_dir {
  std::string path;
  manual_clock time;
  explicit tier_dir(const std::string& under = "/tmp") {
    std::string templ = under + "/warm-tier-XXXXXX";
    path = mkdtemp(templ.data());
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
                const std::string& etag = "e1", double fetch_seconds = 0.5) {
  auto r = t.reserve(key, "model.safetensors", bytes);
  REQUIRE(r);
  write_file(r->temp_path, std::string(bytes, fill));
  auto c = t.commit(std::move(*r), etag, fetch_seconds);
  REQUIRE(c);
  return *c;
}

// The keys of files(), first to be evicted first.
std::vector<std::string> order(const disk_tier& t) {
  std::vector<std::string> out;
  for (const auto& f : t.files())
    out.push_back(f.key);
  return out;
}

// objects/<h> of a committed file.
fs::path entry_dir(const tier_file& f) {
  return fs::path(f.path).parent_path();
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("a file written, committed and found again, confined to the tier") {
  tier_dir d;
  auto t = d.open(1000);
  CHECK(mode_of(d.dir()) == 0700);
  auto r = t.reserve("s3://b/m/1/model.safetensors", "model.safetensors", 10);
  REQUIRE(r);
  CHECK(r->temp_path.rfind(d.dir() + "/incoming/", 0) == 0);
  CHECK(mode_of(r->temp_path) == 0600);  // created by reserve, empty, for the writer to open
  CHECK(fs::file_size(r->temp_path) == 0);
  CHECK(t.stats().reserved == 10);
  CHECK_FALSE(t.find("s3://b/m/1/model.safetensors", ""));  // nothing until committed
  write_file(r->temp_path, "0123456789");
  auto c = t.commit(std::move(*r), "tag-1", 1.25);
  REQUIRE(c);
  CHECK(c->path.rfind(d.dir() + "/objects/", 0) == 0);
  CHECK(fs::path(c->path).filename() == "model.safetensors");
  CHECK(entry_dir(*c).filename().string().size() == 32);  // the key's hash, not the URL
  CHECK(fs::exists(entry_dir(*c) / "entry.json"));
  CHECK(read_all(c->path) == "0123456789");
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  auto f = t.find("s3://b/m/1/model.safetensors", "tag-1");
  REQUIRE(f);
  CHECK(f->path == c->path);
  CHECK(f->etag == "tag-1");
  CHECK(f->fetch_seconds == 1.25);
  CHECK(t.find("s3://b/m/1/model.safetensors", ""));  // any etag
  auto s = t.stats();
  CHECK(s.used == 10);
  CHECK(s.reserved == 0);
  CHECK(s.files == 1);
  CHECK(s.hits == 2);
  CHECK(s.misses == 1);
  CHECK(t.dir() == d.dir());
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
  CHECK(t.stats().used == 30);
  d.time.advance(1s);
  REQUIRE(t.find("a", ""));  // a is now the most recently used: b goes first
  CHECK(order(t) == std::vector<std::string>{"b", "c", "a"});
  d.time.advance(1s);
  store(t, "d", 1);
  CHECK(t.stats().evictions == 1);
  CHECK(t.stats().evicted_bytes == 10);
  CHECK_FALSE(t.find("b", ""));
  CHECK(t.find("a", ""));
  CHECK(t.find("c", ""));
  CHECK(t.stats().used == 21);
  auto too_big = t.reserve("e", "model.pt", 31);
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().code == errc::model_too_large);
  auto whole = t.reserve("e", "model.pt", 30);  // the whole budget: everything unpinned goes
  REQUIRE(whole);
  CHECK(t.stats().files == 0);
  CHECK(t.stats().used + t.stats().reserved == 30);
  t.abort(std::move(*whole));
}

TEST_CASE("reserved bytes count against the budget until committed or aborted") {
  tier_dir d;
  auto t = d.open(30);
  store(t, "a", 10);
  auto r1 = t.reserve("b", "model.pt", 10);
  REQUIRE(r1);
  auto r2 = t.reserve("c", "model.pt", 10);  // 10 used + 20 reserved == 30: fits
  REQUIRE(r2);
  CHECK(t.stats().evictions == 0);
  auto r3 = t.reserve("d", "model.pt", 1);  // one more byte: a, the only file, goes
  REQUIRE(r3);
  CHECK(t.stats().evictions == 1);
  CHECK_FALSE(t.find("a", ""));
  auto r4 = t.reserve("e", "model.pt", 1);  // nothing left to evict: 21 reserved, 9 free
  REQUIRE(r4);
  auto refused = t.reserve("f", "model.pt", 9);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::capacity_exhausted);
  for (auto* r : {&*r1, &*r2, &*r3, &*r4})
    t.abort(std::move(*r));
  CHECK(t.stats().reserved == 0);
  CHECK(fs::is_empty(d.dir() + "/incoming"));
}

TEST_CASE("eviction follows the named policy; gdsf weighs the fetch time") {
  tier_dir d;
  auto t = d.open(20, "gdsf");
  store(t, "slow", 10, 's', "e1", 30.0);  // costly to fetch again
  d.time.advance(1s);
  store(t, "quick", 10, 'q', "e1", 0.1);
  REQUIRE(t.find("quick", ""));  // used more, and more recently, yet cheaper to fetch again
  REQUIRE(t.find("quick", ""));
  CHECK(order(t).front() == "quick");
  store(t, "next", 5);
  CHECK_FALSE(t.find("quick", ""));
  CHECK(t.find("slow", ""));
}

TEST_CASE("pins and writes in flight are never evicted") {
  tier_dir d;
  auto t = d.open(20);
  store(t, "a", 10);
  store(t, "b", 10);
  t.pin("a");
  t.pin("b");
  t.pin("b");  // two readers of b
  auto refused = t.reserve("c", "model.safetensors", 5);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::capacity_exhausted);
  CHECK(t.stats().files == 2);
  t.unpin("b");  // one reader left
  REQUIRE_FALSE(t.reserve("c", "model.safetensors", 5));
  t.unpin("b");
  t.unpin("b");                                         // an unpin too many changes nothing
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

  // A write in flight for a key keeps that key's older copy too.
  t.unpin("a");
  auto refresh = t.reserve("a", "model.safetensors", 10);  // a (10) + its new copy (10) of 20
  REQUIRE(refresh);
  auto other = t.reserve("f", "model.safetensors", 1);
  REQUIRE_FALSE(other);
  CHECK(other.error().code == errc::capacity_exhausted);
  CHECK(t.find("a", ""));
  t.abort(std::move(*refresh));
}

TEST_CASE("a stale entity tag removes the copy; a short write is not committed") {
  tier_dir d;
  auto t = d.open(100);
  auto old = store(t, "k", 10, 'o', "v1");
  CHECK_FALSE(t.find("k", "v2"));
  CHECK_FALSE(fs::exists(old.path));
  CHECK_FALSE(fs::exists(entry_dir(old)));
  CHECK(t.stats().files == 0);
  CHECK(t.stats().misses == 1);
  CHECK(t.stats().used == 0);

  auto r = t.reserve("k", "model.safetensors", 10);
  REQUIRE(r);
  write_file(r->temp_path, "short");
  auto c = t.commit(std::move(*r), "v2", 0.1);
  REQUIRE_FALSE(c);
  CHECK(c.error().code == errc::load_failed);
  CHECK_THAT(c.error().message, Catch::Contains("5 bytes were written of 10"));
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  CHECK(fs::is_empty(d.dir() + "/objects"));
  CHECK(t.stats().reserved == 0);
  CHECK_FALSE(t.find("k", ""));

  auto longer = t.reserve("k", "model.safetensors", 3);
  REQUIRE(longer);
  write_file(longer->temp_path, "four");
  REQUIRE_FALSE(t.commit(std::move(*longer), "v2", 0.1));
  CHECK(fs::is_empty(d.dir() + "/incoming"));
}

TEST_CASE("a copy that vanished from disk is a miss, and a new commit replaces an old copy") {
  tier_dir d;
  auto t = d.open(100);
  auto gone = store(t, "gone", 10);
  fs::remove(gone.path);
  CHECK_FALSE(t.find("gone", ""));
  CHECK(t.stats().files == 0);
  CHECK(t.stats().used == 0);

  auto v1 = store(t, "k", 10, '1', "v1");
  auto v2 = store(t, "k", 20, '2', "v2", 2.0);
  CHECK(v2.path == v1.path);
  CHECK(read_all(v2.path) == std::string(20, '2'));
  CHECK(t.stats().files == 1);
  CHECK(t.stats().used == 20);
  CHECK(t.stats().evictions == 0);
  auto f = t.find("k", "v2");
  REQUIRE(f);
  CHECK(f->bytes == 20);
  CHECK(fs::directory_entry(entry_dir(v2)).exists());
  std::size_t in_dir = 0;
  for (const auto& e : fs::directory_iterator(entry_dir(v2))) {
    (void)e;
    ++in_dir;
  }
  CHECK(in_dir == 2);  // the file and its record, nothing else
}

TEST_CASE("names and keys that could leave the directory are refused") {
  tier_dir d;
  auto t = d.open(100);
  for (const auto& bad : std::vector<std::string>{
           "", ".", "..", "../escape", "a/b", "/etc/passwd", "entry.json", std::string(256, 'n'),
           std::string("nul\0here", 8), std::string("\xff\xfe", 2)}) {
    auto r = t.reserve("k", bad, 1);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
  }
  CHECK(t.reserve("k1", std::string(255, 'n'), 1));  // the longest name there is
  CHECK(t.reserve("k2", "entry.json.partial", 1));   // a name like the record's is fine
  CHECK_FALSE(t.reserve("", "model.pt", 1));         // no key
  CHECK_FALSE(t.reserve(std::string("\xc3", 1), "model.pt", 1));  // a key a record cannot hold
  CHECK_FALSE(t.reserve(std::string(16 * 1024 + 1, 'k'), "model.pt", 1));
  CHECK(t.stats().reserved == 2);
  CHECK(fs::is_empty(d.dir() + "/objects"));
  CHECK_FALSE(fs::exists(d.path + "/escape"));
}

TEST_CASE("a reservation committed or aborted twice, or changed, does not upset the accounting") {
  tier_dir d;
  auto t = d.open(100);
  auto r = t.reserve("k", "model.pt", 4);
  REQUIRE(r);
  write_file(r->temp_path, "1234");
  const auto copy = *r;
  REQUIRE(t.commit(std::move(*r), "e", 0.1));
  auto again = t.commit(copy, "e", 0.1);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::invalid_argument);
  t.abort(copy);
  CHECK(t.stats().reserved == 0);
  CHECK(t.stats().used == 4);
  CHECK(t.find("k", "e"));

  auto a = t.reserve("a", "model.pt", 5);
  REQUIRE(a);
  const auto a_copy = *a;
  t.abort(std::move(*a));
  t.abort(a_copy);
  CHECK(t.stats().reserved == 0);

  auto changed = t.reserve("c", "model.pt", 2);
  REQUIRE(changed);
  write_file(changed->temp_path, "12");
  changed->name = "../../outside";
  auto refused = t.commit(std::move(*changed), "e", 0.1);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK(t.stats().reserved == 0);
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  CHECK_FALSE(fs::exists(d.path + "/outside"));

  auto bad_tag = t.reserve("t", "model.pt", 1);
  REQUIRE(bad_tag);
  write_file(bad_tag->temp_path, "1");
  REQUIRE_FALSE(t.commit(std::move(*bad_tag), std::string("\xff", 1), 0.1));
  CHECK(t.stats().reserved == 0);
  CHECK(t.stats().files == 1);
}

TEST_CASE("a temp file swapped for a link is not followed at commit") {
  tier_dir d;
  auto t = d.open(100);
  const auto outside = d.path + "/outside.txt";
  write_file(outside, "precious");
  auto r = t.reserve("k", "model.pt", 8);
  REQUIRE(r);
  fs::remove(r->temp_path);
  fs::create_symlink(outside, r->temp_path);
  auto c = t.commit(std::move(*r), "e", 0.1);
  REQUIRE_FALSE(c);
  CHECK(read_all(outside) == "precious");
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  CHECK(fs::is_empty(d.dir() + "/objects"));
  CHECK(t.stats().reserved == 0);
}

TEST_CASE("open keeps complete entries and removes what a crash left, touching nothing outside") {
  tier_dir d;
  const auto outside = d.path + "/outside.txt";
  write_file(outside, "precious");
  std::string kept_path;
  {
    auto t = d.open(1000);
    kept_path = store(t, "s3://b/kept", 10, 'k', "etag-k", 3.5).path;
    auto lying = store(t, "s3://b/lying", 10, 'l');  // 1: a size the record does not say
    write_file(lying.path, "longer than the record says");
    auto no_record = store(t, "s3://b/norecord", 10, 'n');  // 2: no record
    fs::remove(entry_dir(no_record) / "entry.json");
    auto malformed = store(t, "s3://b/malformed", 10);  // 3: a record that is not JSON
    write_file((entry_dir(malformed) / "entry.json").string(), "{\"key\": ");
    auto moved = store(t, "s3://b/moved", 10);  // 4: a key that does not hash to its directory
    fs::rename(entry_dir(moved), d.dir() + "/objects/00000000000000000000000000000000");
    auto extra = store(t, "s3://b/extra", 10);  // 5: a file besides the record and the model
    write_file((entry_dir(extra) / "model.safetensors.tmp").string(), "stray");
    auto escaping = store(t, "s3://b/escaping", 10);  // 6: a record naming a file outside
    {
      auto rec = nlohmann::json::parse(read_all((entry_dir(escaping) / "entry.json").string()));
      rec["name"] = "../../../outside.txt";
      write_file((entry_dir(escaping) / "entry.json").string(), rec.dump());
    }
    auto linked = store(t, "s3://b/linked-record", 10);  // 7: the record is a link
    fs::rename(entry_dir(linked) / "entry.json", d.path + "/record.json");
    fs::create_symlink(d.path + "/record.json", entry_dir(linked) / "entry.json");
    auto pending = t.reserve("s3://b/pending", "model.safetensors", 10);  // 8: a write cut short
    REQUIRE(pending);
    write_file(pending->temp_path, "half");
  }
  // 9, 10: a model file that is a link to a file outside, and a link in objects/ itself.
  fs::create_directory(d.dir() + "/objects/0123456789abcdef0123456789abcdef");
  fs::create_symlink(outside, d.dir() + "/objects/0123456789abcdef0123456789abcdef/model.pt");
  fs::create_symlink(outside, d.dir() + "/objects/link");
  fs::create_directory_symlink(d.path, d.dir() + "/objects/dirlink");  // 11: a link to a directory
  fs::create_symlink(outside, d.dir() + "/incoming/linked.1");         // 12: a link in incoming/

  auto t = d.open(1000);
  CHECK(t.stats().removed_at_open == 12);
  CHECK(t.stats().files == 1);
  CHECK(t.stats().used == 10);
  auto kept = t.find("s3://b/kept", "etag-k");
  REQUIRE(kept);
  CHECK(kept->path == kept_path);
  CHECK(kept->fetch_seconds == 3.5);
  CHECK(kept->bytes == 10);
  CHECK(read_all(outside) == "precious");
  CHECK(fs::exists(d.path + "/record.json"));
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  std::size_t left = 0;
  for (const auto& e : fs::directory_iterator(d.dir() + "/objects")) {
    (void)e;
    ++left;
  }
  CHECK(left == 1);
}

TEST_CASE("reopened, the tier keeps its files; a smaller budget evicts the oldest stored") {
  tier_dir d;
  {
    auto t = d.open(100);
    store(t, "a", 40, 'a', "ea", 1.5);
    store(t, "b", 40, 'b', "eb", 2.5);
  }
  {
    auto t = d.open(100);
    CHECK(t.stats().removed_at_open == 0);
    CHECK(order(t) == std::vector<std::string>{"a", "b"});  // oldest stored first
    auto b = t.find("b", "eb");
    REQUIRE(b);
    CHECK(b->fetch_seconds == 2.5);
    CHECK(read_all(b->path) == std::string(40, 'b'));
  }
  {
    auto t = d.open(50);
    CHECK(t.stats().files == 1);
    CHECK(t.stats().used == 40);
    CHECK(t.stats().evictions == 1);
    CHECK_FALSE(t.find("a", ""));
    auto b = t.find("b", "eb");
    REQUIRE(b);
    CHECK(b->fetch_seconds == 2.5);
  }
}

TEST_CASE("open refuses a link for the directory, a file, a held directory and bad settings") {
  tier_dir d;
  { d.open(100); }  // creates DIR
  fs::create_directory_symlink(d.dir(), d.path + "/link");
  for (const auto& path : {d.path + "/link", d.path + "/link/", d.path + "/link//"}) {
    auto linked = disk_tier::open(path, 100, "lru", d.time);
    REQUIRE_FALSE(linked);
    CHECK(linked.error().code == errc::invalid_argument);
  }
  write_file(d.path + "/file", "x");
  auto file = disk_tier::open(d.path + "/file", 100, "lru", d.time);
  REQUIRE_FALSE(file);
  CHECK(file.error().code == errc::invalid_argument);
  CHECK_FALSE(disk_tier::open(d.dir(), 0, "lru", d.time));
  CHECK_FALSE(disk_tier::open(d.dir(), 100, "no-such-policy", d.time));
  CHECK_FALSE(disk_tier::open(d.path + "/missing/tier", 100, "lru", d.time));

  auto first = d.open(100);
  auto second = disk_tier::open(d.dir() + "/", 100, "lru", d.time);
  REQUIRE_FALSE(second);
  CHECK(second.error().code == errc::unavailable);
  {
    auto moved = std::move(first);  // the lock moves with the tier and ends with it
  }
  CHECK(disk_tier::open(d.dir(), 100, "lru", d.time));
}

TEST_CASE("a full disk at commit leaves nothing behind (WARM_TIER_SMALL_FS)") {
  const char* small = std::getenv("WARM_TIER_SMALL_FS");
  if (!small || !*small) {
    WARN("WARM_TIER_SMALL_FS is not set: the full-disk case is not run");
    return;
  }
  tier_dir d(small);
  auto t = d.open(1 << 30);
  auto r = t.reserve("k", "model.pt", 4096);
  REQUIRE(r);
  write_file(r->temp_path, std::string(4096, 'k'));
  {  // fill what is left of the file system
    std::ofstream filler(d.path + "/filler", std::ios::binary);
    const std::string block(4096, 'f');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }
  auto c = t.commit(std::move(*r), "e", 0.1);
  REQUIRE_FALSE(c);
  CHECK(c.error().code == errc::load_failed);
  CHECK_THAT(c.error().message, Catch::Contains("No space left"));
  CHECK(t.stats().reserved == 0);
  CHECK(t.stats().files == 0);
  CHECK(fs::is_empty(d.dir() + "/incoming"));
  CHECK(fs::is_empty(d.dir() + "/objects"));
  fs::remove(d.path + "/filler");
  store(t, "k", 4096);
  CHECK(t.find("k", "e1"));
}
