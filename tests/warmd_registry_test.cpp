// Black-box tests of warmd's registry and config bounds: --max-models counts vmodels too, a
// registry.db with damaged pages stops the start (naming the file and the recovery) instead of
// starting empty, and config files that are refused exit 2 naming the key and line (a dotted key
// of 50,000 parts among them, which once overflowed the parser's stack). The real build/warmd
// ($WARMD) on a temporary directory, driven over Cap'n Proto.
#include <catch2/catch.hpp>

#include <capnp/ez-rpc.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "rpc/convert.hpp"
#include "support/warmd_process.hpp"

namespace fs = std::filesystem;
namespace r = warm::rpc;
using Code = warm::rpc::Status::Code;
using warm::test::warmd_process;

namespace {

struct rpc_client {
  capnp::EzRpcClient client;
  r::Warm::Client warm;
  explicit rpc_client(const warmd_process& d)
      : client(d.address()), warm(client.getMain<r::Warm>()) {}
  kj::WaitScope& ws() { return client.getWaitScope(); }

  Code set_vmodel(const std::string& id, const std::string& target,
                  std::string* message = nullptr) {
    auto req = warm.setVModelRequest();
    req.setId(id);
    req.setTarget(target);
    auto res = req.send().wait(ws());
    if (message) *message = res.getStatus().getMessage().cStr();
    return res.getStatus().getCode();
  }
  Code register_code(const std::string& id, const std::string& path,
                     std::string* message = nullptr) {
    auto req = warm.registerModelRequest();
    req.setId(id);
    req.getInfo().setPath(path);
    auto res = req.send().wait(ws());
    if (message) *message = res.getStatus().getMessage().cStr();
    return res.getStatus().getCode();
  }
};

// The page number of `table`'s root in the SQLite file at `path`, read with SQLite itself.
int root_page_of(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = ?1", -1, &s,
                             nullptr) == SQLITE_OK);
  sqlite3_bind_text(s, 1, table.c_str(), -1, SQLITE_TRANSIENT);
  int page = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return page;
}

}  // namespace

TEST_CASE("warmd: --max-models bounds models and vmodels together") {
  warmd_process d;
  d.write_model("m", {8, 4});
  d.start({"--max-models", "3"});
  rpc_client c(d);
  CHECK(c.register_code("a", "m") == Code::OK);
  CHECK(c.set_vmodel("v1", "a") == Code::OK);
  CHECK(c.set_vmodel("v2", "a") == Code::OK);  // 3: exactly the limit
  std::string message;
  CHECK(c.set_vmodel("v3", "a", &message) == Code::CAPACITY_EXHAUSTED);
  CHECK_THAT(message, Catch::Contains("limit of 3 models and vmodels"));
  CHECK(c.register_code("b", "m", &message) == Code::CAPACITY_EXHAUSTED);
  CHECK_THAT(message, Catch::Contains("limit of 3"));
  CHECK(c.set_vmodel("v1", "a") == Code::OK);  // changing an existing vmodel takes no room
  CHECK(d.stop() == 0);
}

// Damaged pages in the models table: SQLite reads them as fewer rows (or fails later), and warmd
// used to start with an empty registry and say nothing.
TEST_CASE(
    "warmd: a registry.db with damaged pages stops the start, naming the file and the recovery") {
  warmd_process d;
  d.write_model("m", {8, 4});
  d.start();
  {
    rpc_client c(d);
    for (int i = 0; i < 200; ++i)  // long ids: the models table spans several pages
      REQUIRE(c.register_code("model-" + std::to_string(i) + "-" + std::string(100, 'x'), "m") ==
              Code::OK);
    REQUIRE(c.set_vmodel("v", "model-0-" + std::string(100, 'x')) == Code::OK);
  }
  REQUIRE(d.stop() == 0);
  auto db = (d.dir() / "state/registry.db").string();
  REQUIRE((!fs::exists(db + "-wal") || fs::file_size(db + "-wal") == 0));  // checkpointed at close
  int root = root_page_of(db, "models");
  REQUIRE(root > 1);
  {
    std::fstream f(db, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(root - 1) *
            4096);  // warm's pages are SQLite's default 4 KiB
    std::string garbage(4096, '\0');
    for (std::size_t i = 0; i < garbage.size(); ++i)
      garbage[i] = static_cast<char>((i * 7919 + 13) & 0xff);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto damaged_size = fs::file_size(db);
  int status = d.run_to_exit({"--listen", d.address()});
  CHECK(status == 1);
  auto log = d.log();
  CHECK_THAT(log, Catch::Contains(db) && Catch::Contains("corrupt") &&
                      Catch::Contains("move the file aside") && Catch::Contains(".recover"));
  CHECK(fs::file_size(db) == damaged_size);  // left as it was, for the recovery
  CHECK(!fs::exists(d.socket()));            // nothing was served

  // The documented recovery: moved aside, warmd starts on an empty registry.
  fs::rename(db, db + ".bad");
  fs::remove(db + "-wal");
  fs::remove(db + "-shm");
  d.start();
  rpc_client c(d);
  CHECK(c.register_code("again", "m") == Code::OK);
  CHECK(d.stop() == 0);
}

TEST_CASE(
    "warmd --config: refused files exit 2 naming the key and line, a 50,000-part dotted key too") {
  warmd_process d;
  auto write = [&](const std::string& name, const std::string& text) {
    auto path = (d.dir() / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  };
  std::string parts = "a";
  for (int i = 1; i < 50'000; ++i)
    parts += ".a";
  auto deep = write("deep.toml", "log-level = \"warn\"\n" + parts + " = 1\n");
  CHECK(d.run_to_exit({"--config", deep}) == 2);
  CHECK_THAT(d.log(), Catch::Contains(deep) &&
                          Catch::Contains("dotted key of more than 64 parts") &&
                          Catch::Contains("(line 2)"));

  auto unknown = write("unknown.toml", "log-level = \"warn\"\n\nport = 7411\n");
  CHECK(d.run_to_exit({"--config", unknown}) == 2);
  CHECK_THAT(d.log(), Catch::Contains(unknown + ": unknown key \"port\" (line 3)"));

  auto mistyped = write("mistyped.toml", "max-models = \"5\"\n");
  CHECK(d.run_to_exit({"--config", mistyped}) == 2);
  CHECK_THAT(d.log(), Catch::Contains("key \"max-models\" must be a positive integer (line 1)"));
}
