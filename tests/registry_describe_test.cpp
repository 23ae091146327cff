// The registry's file and disk work runs off its thread: header reads (a registration's, a
// describe's) on the offload, commits on its store writer; and descriptions are read once per
// file identity. The first cases drive the registry actor itself with an offload queue the test
// holds (and a SQLite lock it holds), so "the registry answers while that work is in progress" is
// shown by events, not by timing; the last goes through warm::runtime and shows, from what a
// describe answers, that an unchanged file is not parsed again and a changed one is.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/stat.h>
#include <caf/all.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>

#include "actors/protocol/registry_protocol.hpp"
#include "actors/registry_actor.hpp"
#include "storage/registry_store.hpp"
#include "support/runtime_fixture.hpp"
#include "support/test_files.hpp"
#include "warm/model_writer.hpp"

using namespace std::chrono_literals;
using namespace warm;
namespace fs = std::filesystem;

namespace {

// Tasks the registry offloads, kept until the test runs them.
struct held_tasks {
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<std::function<void()>> tasks;

  void push(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mutex);
    tasks.push_back(std::move(task));
    arrived.notify_all();
  }
  // Waits (bounded) for a task and takes it; an empty function when none came.
  std::function<void()> take() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!arrived.wait_for(lock, 30s, [&] { return !tasks.empty(); })) return {};
    auto task = std::move(tasks.front());
    tasks.pop_front();
    return task;
  }
};

template <class T>
std::pair<callback<T>, std::future<expected<T>>> promised() {
  auto p = std::make_shared<std::promise<expected<T>>>();
  auto f = p->get_future();
  return {[p](expected<T> v) { p->set_value(std::move(v)); }, std::move(f)};
}

// A registry of its own over dir/state and dir/repo, whose offloaded tasks the test holds.
struct registry_rig {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  std::shared_ptr<held_tasks> held = std::make_shared<held_tasks>();
  registry_actor registry;

  explicit registry_rig(const test::temp_dir& dir) {
    registry_config config;
    auto store = registry_store::open(dir / "state");
    REQUIRE(store);
    config.store = std::make_unique<registry_store>(std::move(*store));
    auto repository = model_repository::create({dir / "repo"});
    REQUIRE(repository);
    config.repository = std::make_shared<model_repository>(std::move(*repository));
    config.routes = std::make_shared<route_table>();
    config.time = std::make_shared<steady_clock>();
    config.offload = [held = held](std::function<void()> task) { held->push(std::move(task)); };
    registry = spawn_registry(system, std::move(config));
  }
  ~registry_rig() { caf::anon_send_exit(registry, caf::exit_reason::user_shutdown); }

  // Sends a registration of `id` (file `id`); its header read is left held.
  std::future<expected<void>> start_register(const std::string& id) {
    auto [done, result] = promised<void>();
    caf::anon_send(registry, msg::register_model{id, {id}, false, false, done});
    return std::move(result);
  }
  // Registers `id`, running its header read; true once durable.
  bool register_now(const std::string& id) {
    auto result = start_register(id);
    auto task = held->take();
    if (!task) return false;
    task();
    return result.wait_for(30s) == std::future_status::ready && result.get().has_value();
  }
  model_status status(const std::string& id) {
    auto [done, result] = promised<model_status>();
    caf::anon_send(registry, msg::get_status{id, done});
    REQUIRE(result.wait_for(30s) == std::future_status::ready);
    auto st = result.get();
    REQUIRE(st);
    return *st;
  }
};

// dir/repo holding a (16 -> 8) and b (`b_widths`), and a registry over it that has registered a.
struct a_registered {
  explicit a_registered(std::vector<std::uint64_t> b_widths = {16, 8}) {
    REQUIRE(write_dense_model(dir / "repo/a/1/model.safetensors", {{16, 8}, activation::relu, 1}));
    REQUIRE(write_dense_model(dir / "repo/b/1/model.safetensors",
                              {std::move(b_widths), activation::relu, 1}));
    rig.emplace(dir);
    REQUIRE(rig->register_now("a"));
  }
  test::temp_dir dir;
  std::optional<registry_rig> rig;  // stopped before dir goes
};

// Another connection's write transaction on the registry's database: the store writer's commit
// waits for it (up to registry_store::busy_timeout) while it is held.
struct write_lock {
  sqlite3* db = nullptr;
  explicit write_lock(const fs::path& file) {
    REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  void release() {
    if (db) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr), sqlite3_close(db);
    db = nullptr;
  }
  ~write_lock() { release(); }
};

}  // namespace

TEST_CASE("a registration's header is read off the registry's thread; an identical one joins it") {
  a_registered setup({32, 4});
  auto& rig = *setup.rig;

  auto first = rig.start_register("b");
  auto read = rig.held->take();  // b's header read, held: the registration is in progress
  REQUIRE(read);
  auto second = rig.start_register("b");
  CHECK(rig.status("a").state == model_state::not_loaded);  // answered meanwhile
  CHECK(rig.status("b").state ==
        model_state::not_found);  // not registered until its header is read
  CHECK(first.wait_for(0s) == std::future_status::timeout);
  CHECK(second.wait_for(0s) == std::future_status::timeout);
  {
    std::lock_guard<std::mutex> lock(rig.held->mutex);
    CHECK(rig.held->tasks.empty());  // the second registration read nothing: it joined the first
  }

  read();
  REQUIRE(first.wait_for(30s) == std::future_status::ready);
  REQUIRE(second.wait_for(30s) == std::future_status::ready);
  CHECK(first.get());
  CHECK(second.get());
  auto b = rig.status("b");
  CHECK(b.state == model_state::not_loaded);
  CHECK(b.input_width == 32);
  CHECK(b.output_width == 4);
}

TEST_CASE(
    "a commit in flight holds up no request, and a registration is answered only once durable") {
  a_registered setup;
  auto& rig = *setup.rig;
  const auto& dir = setup.dir;

  write_lock lock(dir / "state/registry.db");
  auto b = rig.start_register("b");
  auto read = rig.held->take();
  REQUIRE(read);
  read();  // b enters the tables and its commit goes to the writer, which waits for the lock
  CHECK(rig.status("a").state == model_state::not_loaded);  // the registry answers meanwhile
  CHECK(rig.status("b").state == model_state::not_loaded);  // memory has b already...
  CHECK(b.wait_for(0s) == std::future_status::timeout);     // ...but it is not acknowledged yet

  lock.release();
  REQUIRE(b.wait_for(30s) == std::future_status::ready);
  CHECK(b.get());
  auto stored = registry_store::open(dir / "state");
  REQUIRE(stored);
  auto contents = stored->load();
  REQUIRE(contents);
  REQUIRE(contents->models.size() == 2);
  CHECK(contents->models[1].id == "b");
}

TEST_CASE(
    "a failed commit leaves memory as the disk is: the registration is refused and forgotten") {
  a_registered setup;
  auto& rig = *setup.rig;
  const auto& dir = setup.dir;

  write_lock lock(dir / "state/registry.db");  // held past the writer's busy timeout
  auto b = rig.start_register("b");
  auto read = rig.held->take();
  REQUIRE(read);
  read();
  REQUIRE(b.wait_for(registry_store::busy_timeout + 30s) == std::future_status::ready);
  auto refused = b.get();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::timeout);
  CHECK(rig.status("b").state ==
        model_state::not_found);  // memory does not claim what the disk lacks
  CHECK(rig.status("a").state == model_state::not_loaded);

  lock.release();
  REQUIRE(rig.register_now("b"));  // and the registry goes on
  CHECK(rig.status("b").state == model_state::not_loaded);
}

TEST_CASE(
    "a describe's file work runs off the registry's thread: other requests are answered "
    "meanwhile") {
  test::temp_dir dir;
  REQUIRE(write_dense_model(dir / "repo/m/1/model.safetensors", {{16, 8}, activation::relu, 1}));
  registry_rig rig(dir);
  REQUIRE(rig.register_now("m"));

  auto [described, description] = promised<model_metadata>();
  caf::anon_send(rig.registry, msg::describe_model{"m", described});
  auto task = rig.held->take();  // the describe's work, held: the describe is in progress
  REQUIRE(task);
  CHECK(rig.status("m").state == model_state::not_loaded);  // answered while the describe waits
  CHECK(description.wait_for(0s) == std::future_status::timeout);  // not answered by the registry

  task();  // the worker's part: open, parse, answer
  REQUIRE(description.wait_for(30s) == std::future_status::ready);
  auto meta = description.get();
  REQUIRE(meta);
  CHECK(meta->input_width == 16);
  CHECK(meta->output_width == 8);
  CHECK(meta->activation == "relu");
}

// The description is kept with the file's identity (device, inode, size, mtime). A file whose
// bytes change but whose identity is made the same again (rewritten in place, mtime set back)
// still gets the kept description: evidence that describe did not parse it again. Any change of
// identity (here the mtime) makes it read again.
TEST_CASE("describe parses a model file once per identity") {
  test::runtime_fixture f({"a"});
  fs::path path = f.dir / "repo/m/1/model.safetensors";
  REQUIRE(write_dense_model(path, {{16, 8}, activation::relu, 1}));
  REQUIRE(f.rt->register_model("m", {"m"}).get());
  auto first = f.rt->describe("m").get();
  REQUIRE(first);
  CHECK(first->activation == "relu");
  auto stamp = fs::last_write_time(path);

  // The same model with another activation of the same length ("tanh"): the same size.
  auto other = dense_model_bytes({{16, 8}, activation::tanh, 1});
  REQUIRE(other);
  REQUIRE(other->size() == fs::file_size(path));
  {
    std::ofstream out(path,
                      std::ios::binary | std::ios::in | std::ios::out);  // in place: same inode
    out.write(other->data(), static_cast<std::streamsize>(other->size()));
  }
  fs::last_write_time(path, stamp);
  for (int i = 0; i < 3; ++i) {
    auto again = f.rt->describe("m").get();
    REQUIRE(again);
    CHECK(again->activation == "relu");  // answered from memory: the file was not parsed again
  }

  fs::last_write_time(path, stamp + 1s);
  auto changed = f.rt->describe("m").get();
  REQUIRE(changed);
  CHECK(changed->activation == "tanh");  // a new identity: read again
}

// The registration reads the file's description already: the first describe of an unchanged file
// answers from it (a TorchScript file would otherwise be loaded by libtorch once more).
TEST_CASE("the first describe reuses the registration's reading of the file") {
  test::runtime_fixture f({"a"});
  fs::path path = f.dir / "repo/m/1/model.safetensors";
  REQUIRE(write_dense_model(path, {{16, 8}, activation::relu, 1}));
  REQUIRE(f.rt->register_model("m", {"m"}).get());
  auto stamp = fs::last_write_time(path);
  auto other = dense_model_bytes({{16, 8}, activation::tanh, 1});
  REQUIRE(other);
  {
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);  // same inode, size
    out.write(other->data(), static_cast<std::streamsize>(other->size()));
  }
  fs::last_write_time(path, stamp);
  auto first = f.rt->describe("m").get();
  REQUIRE(first);
  CHECK(first->activation == "relu");  // as registered: not parsed again
}
