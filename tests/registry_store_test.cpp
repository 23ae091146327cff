// The durable registry: round trips, upserts, erasure, all-or-nothing batches, durability across
// instances, directory creation, and refusing files that are not (or not yet) ours.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "storage/registry_store.hpp"
#include "support/test_files.hpp"

namespace fs = std::filesystem;

namespace Catch {
template <>
struct StringMaker<warm::model_record> {
  static std::string convert(const warm::model_record& r) {
    std::ostringstream out;
    out << "{" << r.id << ", " << r.path
        << ", v=" << (r.version ? std::to_string(*r.version) : "none")
        << ", size=" << (r.size_hint ? std::to_string(*r.size_hint) : "none")
        << ", auto_delete=" << r.auto_delete;
    if (r.batching) {
      out << ", batching={" << r.batching->max_batch << ", " << r.batching->max_queue_delay.count()
          << "us, [";
      for (auto p : r.batching->preferred_batch)
        out << p << " ";
      out << "], " << r.batching->max_queue << "}";
    }
    out << "}";
    return out.str();
  }
};
template <>
struct StringMaker<warm::vmodel_record> {
  static std::string convert(const warm::vmodel_record& r) {
    return "{" + r.id + ", active=" + r.active + ", target=" + r.target + "}";
  }
};
}  // namespace Catch

namespace {

constexpr std::uint64_t int64_max = std::numeric_limits<std::int64_t>::max();

warm::registry_store open_store(const std::string& dir) {
  auto store = warm::registry_store::open(dir);
  if (!store) FAIL(store.error().to_string());
  return std::move(store).value();
}

warm::registry_contents load_all(const warm::registry_store& store) {
  auto contents = store.load();
  if (!contents) FAIL(contents.error().to_string());
  return std::move(contents).value();
}

void apply_batch(warm::registry_store& store, const std::vector<warm::registry_change>& batch) {
  auto done = store.apply(batch);
  if (!done) FAIL(done.error().to_string());
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `sql` on the file directly, bypassing the store (to make files warm did not write).
void raw_sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

const warm::model_record full{"resnet", "vision/resnet", 7, 123456789, true, std::nullopt};
const warm::model_record bare{"bert", "text/bert", std::nullopt, std::nullopt, false, std::nullopt};
const warm::vmodel_record settled{"classify", "resnet", "resnet"};
const warm::vmodel_record moving{"embed", "bert", "bert-v2"};

}  // namespace

TEST_CASE("a new store is empty and lives at <state_dir>/registry.db") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  CHECK(store.path() == dir / "registry.db");
  CHECK(fs::is_regular_file(store.path()));
  auto contents = load_all(store);
  CHECK(contents.models.empty());
  CHECK(contents.vmodels.empty());
  CHECK(store.apply({}));  // an empty batch is fine
}

TEST_CASE("records round-trip with their optional fields, sorted by id") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  const warm::model_record edge{"edge", "x/edge", int64_max,
                                0,      false,    std::nullopt};  // largest storable, zero
  apply_batch(store, {warm::put_model{full}, warm::put_vmodel{moving}, warm::put_model{bare},
                      warm::put_model{edge}, warm::put_vmodel{settled}});
  auto contents = load_all(store);
  CHECK(contents.models == std::vector<warm::model_record>{bare, edge, full});
  CHECK(contents.vmodels == std::vector<warm::vmodel_record>{settled, moving});
}

TEST_CASE("a put replaces every field of the record with that id") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  apply_batch(store, {warm::put_model{full}, warm::put_vmodel{moving}});
  const warm::model_record replaced{"resnet", "vision/resnet50", std::nullopt, 42,
                                    false,    std::nullopt};
  const warm::vmodel_record settled_now{"embed", "bert-v2", "bert-v2"};
  apply_batch(store, {warm::put_model{replaced}, warm::put_vmodel{settled_now}});
  auto contents = load_all(store);
  CHECK(contents.models == std::vector<warm::model_record>{replaced});  // version back to none
  CHECK(contents.vmodels == std::vector<warm::vmodel_record>{settled_now});

  // Later changes in one batch win over earlier ones.
  const warm::model_record last{"resnet", "vision/resnet", 9, std::nullopt, true, std::nullopt};
  apply_batch(store, {warm::put_model{full}, warm::put_model{last}});
  CHECK(load_all(store).models == std::vector<warm::model_record>{last});
}

TEST_CASE("erase removes only the named record; a missing id is not an error") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  const warm::vmodel_record named_like_model{"resnet", "resnet", "resnet"};
  apply_batch(store, {warm::put_model{full}, warm::put_model{bare}, warm::put_vmodel{settled},
                      warm::put_vmodel{named_like_model}});
  apply_batch(store, {warm::erase_model{"resnet"}, warm::erase_model{"never-registered"},
                      warm::erase_vmodel{"classify"}, warm::erase_vmodel{"never-registered"}});
  auto contents = load_all(store);
  CHECK(contents.models == std::vector<warm::model_record>{bare});
  CHECK(contents.vmodels == std::vector<warm::vmodel_record>{named_like_model});  // same id kept
}

TEST_CASE("a batch that fails midway applies nothing, and the store stays usable") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  apply_batch(store, {warm::put_model{full}, warm::put_vmodel{settled}});
  const auto before = load_all(store);

  auto too_big = bare;
  SECTION("version") {
    too_big.version = int64_max + 1;
  }
  SECTION("size_hint") {
    too_big.size_hint = std::numeric_limits<std::uint64_t>::max();
  }
  // The first two changes run before the third fails: they must be rolled back.
  auto failed = store.apply({warm::erase_model{"resnet"}, warm::put_vmodel{moving},
                             warm::put_model{too_big}, warm::put_model{bare}});
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == warm::errc::invalid_argument);
  CHECK_THAT(failed.error().message, Catch::Contains("registry.db") && Catch::Contains("'bert'") &&
                                         Catch::Contains("exceeds"));
  auto after = load_all(store);
  CHECK(after.models == before.models);
  CHECK(after.vmodels == before.vmodels);

  apply_batch(store, {warm::put_model{bare}});  // no transaction was left open
  CHECK(load_all(store).models == std::vector<warm::model_record>{bare, full});
  auto reopened = open_store(dir.path());  // and nothing of the failed batch reached the file
  CHECK(load_all(reopened).vmodels == before.vmodels);
}

TEST_CASE("everything survives closing and reopening the store") {
  warm::test::temp_dir dir;
  {
    auto store = open_store(dir.path());
    apply_batch(store, {warm::put_model{full}, warm::put_model{bare}, warm::put_vmodel{moving}});
    apply_batch(store, {warm::put_vmodel{settled}, warm::erase_model{"bert"}});
  }
  {
    auto store = open_store(dir.path());
    auto contents = load_all(store);
    CHECK(contents.models == std::vector<warm::model_record>{full});
    CHECK(contents.vmodels == std::vector<warm::vmodel_record>{settled, moving});
    apply_batch(store, {warm::put_model{bare}});
  }
  auto store = open_store(dir.path());
  CHECK(load_all(store).models == std::vector<warm::model_record>{bare, full});
}

TEST_CASE("two stores on one file see each other's commits; a moved store keeps working") {
  warm::test::temp_dir dir;
  auto first = open_store(dir.path());
  auto second = open_store(dir.path());
  apply_batch(first, {warm::put_model{full}});
  CHECK(load_all(second).models == std::vector<warm::model_record>{full});
  apply_batch(second, {warm::put_vmodel{settled}});
  CHECK(load_all(first).vmodels == std::vector<warm::vmodel_record>{settled});

  warm::registry_store moved(std::move(first));
  CHECK(moved.path() == dir / "registry.db");
  CHECK(load_all(moved).models == std::vector<warm::model_record>{full});
  CHECK(first.load().error().code == warm::errc::internal);  // NOLINT(bugprone-use-after-move)
  second = std::move(moved);  // closes second's connection, takes over moved's
  CHECK(load_all(second).vmodels == std::vector<warm::vmodel_record>{settled});
}

TEST_CASE("a missing state directory is created, private; a file in its place is refused") {
  warm::test::temp_dir dir;
  const std::string state = dir / "var/lib/warm";
  auto store = open_store(state);
  REQUIRE(fs::is_directory(state));
  struct stat st {};
  REQUIRE(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(store.path() == state + "/registry.db");
  CHECK(open_store(state + "/").path() == state + "/registry.db");  // trailing slash

  warm::test::write_file(dir / "plain", "not a directory");
  auto refused = warm::registry_store::open(dir / "plain");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == warm::errc::invalid_argument);
  CHECK_THAT(refused.error().message, Catch::Contains(dir / "plain"));
  CHECK(warm::registry_store::open("").error().code == warm::errc::invalid_argument);
}

TEST_CASE("a registry.db that is not a SQLite database is an error and is left untouched") {
  warm::test::temp_dir dir;
  std::string garbage;
  for (int i = 0; i < 200; ++i)
    garbage += "this is not a database, just some text\n";
  warm::test::write_file(dir / "registry.db", garbage);
  auto store = warm::registry_store::open(dir.path());
  REQUIRE_FALSE(store);
  CHECK(store.error().code == warm::errc::unavailable);
  CHECK_THAT(store.error().message,
             Catch::Contains(dir / "registry.db") && Catch::Contains("not a database"));
  CHECK(read_all(dir / "registry.db") == garbage);
}

// Damaged pages in the models table: SQLite reads a damaged b-tree as fewer rows (or fails only
// on a later read), so a store that opened it would start as an empty registry. open() runs
// PRAGMA quick_check and refuses, naming the file and the recovery, leaving the file as it is.
TEST_CASE("a registry.db with a damaged models table is refused at open, naming the recovery") {
  warm::test::temp_dir dir;
  {
    auto store = open_store(dir.path());
    std::vector<warm::registry_change> batch;
    for (int i = 0; i < 300; ++i)
      batch.push_back(warm::put_model{
          {"model-" + std::to_string(i) + std::string(100, 'x'), "m", 1, {}, false, std::nullopt}});
    apply_batch(store, batch);
  }  // closed: the WAL is checkpointed into the file
  auto db = dir / "registry.db";
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(raw, "SELECT rootpage FROM sqlite_master WHERE name = 'models'", -1,
                             &s, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(s) == SQLITE_ROW);
  int root = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(raw);
  REQUIRE(root > 1);
  {
    std::fstream f(db, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(root - 1) * 4096);
    std::string garbage(4096, '\0');
    for (std::size_t i = 0; i < garbage.size(); ++i)
      garbage[i] = static_cast<char>((i * 7919 + 13) & 0xff);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto damaged = read_all(db);
  auto store = warm::registry_store::open(dir.path());
  REQUIRE_FALSE(store);
  CHECK(store.error().code == warm::errc::unavailable);
  CHECK_THAT(store.error().message, Catch::StartsWith(db) && Catch::Contains("corrupt") &&
                                        Catch::Contains("move the file aside") &&
                                        Catch::Contains(".recover"));
  CHECK(read_all(db) == damaged);
}

TEST_CASE("a newer schema version or a foreign SQLite database is refused") {
  warm::test::temp_dir dir;
  SECTION("newer schema") {
    { auto store = open_store(dir.path()); }
    raw_sql(dir / "registry.db", "PRAGMA user_version = 3");
    auto store = warm::registry_store::open(dir.path());
    REQUIRE_FALSE(store);
    CHECK(store.error().code == warm::errc::invalid_argument);
    CHECK_THAT(store.error().message,
               Catch::Contains(dir / "registry.db") && Catch::Contains("schema version 3"));
  }
  SECTION("someone else's database") {
    raw_sql(dir / "registry.db", "CREATE TABLE notes (body TEXT)");
    auto store = warm::registry_store::open(dir.path());
    REQUIRE_FALSE(store);
    CHECK(store.error().code == warm::errc::invalid_argument);
    CHECK_THAT(store.error().message, Catch::Contains("without warm's registry schema"));
  }
}

TEST_CASE("a model's batching options round-trip; none is not the same as batching off") {
  warm::test::temp_dir dir;
  warm::batching_options off;  // max_batch 0: this model is not batched, whatever the defaults
  warm::batching_options tuned;
  tuned.max_batch = 32;
  tuned.max_queue_delay = std::chrono::microseconds(750);
  tuned.preferred_batch = {8, 16, 32};
  tuned.max_queue = 7;
  warm::batching_options one_size = tuned;
  one_size.preferred_batch = {4};
  const std::vector<warm::model_record> records{{"a", "a", {}, {}, false, tuned},
                                                {"b", "b", {}, {}, false, off},
                                                {"c", "c", {}, {}, false, std::nullopt},
                                                {"d", "d", {}, {}, false, one_size}};
  {
    auto store = open_store(dir.path());
    std::vector<warm::registry_change> batch;
    for (const auto& r : records)
      batch.push_back(warm::put_model{r});
    apply_batch(store, batch);
  }
  auto store = open_store(dir.path());
  CHECK(load_all(store).models == records);
}

TEST_CASE("a registry written by the previous schema version is upgraded in place") {
  warm::test::temp_dir dir;
  raw_sql(dir / "registry.db",
          "CREATE TABLE models (id TEXT PRIMARY KEY NOT NULL, path TEXT NOT NULL,"
          " version INTEGER CHECK (version >= 0), size_hint INTEGER CHECK (size_hint >= 0),"
          " auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1))) WITHOUT ROWID;"
          "CREATE TABLE vmodels (id TEXT PRIMARY KEY NOT NULL, active TEXT NOT NULL, target TEXT "
          "NOT NULL)"
          " WITHOUT ROWID;"
          "INSERT INTO models VALUES ('m', 'm', 3, NULL, 0);"
          "INSERT INTO vmodels VALUES ('v', 'm', 'm');"
          "PRAGMA user_version = 1;");
  warm::batching_options b;
  b.max_batch = 4;
  {
    auto store = open_store(dir.path());
    auto contents = load_all(store);
    REQUIRE(contents.models.size() == 1);
    CHECK(contents.models[0] == warm::model_record{"m", "m", 3, {}, false, std::nullopt});
    REQUIRE(contents.vmodels.size() == 1);
    apply_batch(store, {warm::put_model{{"n", "n", {}, {}, false, b}}});
  }
  auto store = open_store(dir.path());  // now version 2: opened as it is
  auto contents = load_all(store);
  REQUIRE(contents.models.size() == 2);
  CHECK(contents.models[1] == warm::model_record{"n", "n", {}, {}, false, b});
}

TEST_CASE("a corrupt batch_preferred is refused, not read as no preferred sizes") {
  warm::test::temp_dir dir;
  warm::batching_options b;
  b.max_batch = 4;
  b.preferred_batch = {2};
  {
    auto store = open_store(dir.path());
    apply_batch(store, {warm::put_model{{"m", "m", {}, {}, false, b}}});
  }
  for (const char* bad : {"2,", ",2", "2,,4", "x", "-1", "99999999999999999999"}) {
    INFO(bad);
    raw_sql(dir / "registry.db",
            (std::string("UPDATE models SET batch_preferred = '") + bad + "'").c_str());
    auto store = open_store(dir.path());
    auto contents = store.load();
    REQUIRE_FALSE(contents);
    CHECK(contents.error().code == warm::errc::unavailable);
    CHECK_THAT(contents.error().message, Catch::Contains("'m': corrupt row (batch_preferred)"));
  }
}

TEST_CASE("ten thousand puts in one batch load back in order") {
  warm::test::temp_dir dir;
  auto store = open_store(dir.path());
  constexpr int n = 10000;
  std::vector<warm::registry_change> batch;
  batch.reserve(2 * n);
  for (int i = n - 1; i >= 0; --i) {  // in reverse, so that load has to sort
    char id[16];
    std::snprintf(id, sizeof id, "m%05d", i);
    batch.push_back(
        warm::put_model{{id, std::string("models/") + id, std::uint64_t(i),
                         i % 2 ? std::optional<std::uint64_t>(i * 1000ull) : std::nullopt,
                         i % 3 == 0, std::nullopt}});
    batch.push_back(warm::put_vmodel{{std::string("v") + id, id, id}});
  }
  apply_batch(store, batch);
  auto contents = load_all(store);
  REQUIRE(contents.models.size() == n);
  REQUIRE(contents.vmodels.size() == n);
  CHECK(contents.models.front().id == "m00000");
  CHECK(contents.models.back() ==
        warm::model_record{"m09999", "models/m09999", 9999, 9999000, true, std::nullopt});
  CHECK(contents.models[4242] ==
        warm::model_record{"m04242", "models/m04242", 4242, {}, true, std::nullopt});
  CHECK(contents.vmodels[17] == warm::vmodel_record{"vm00017", "m00017", "m00017"});
  for (int i = 1; i < n; ++i)
    REQUIRE(contents.models[i - 1].id < contents.models[i].id);
}
