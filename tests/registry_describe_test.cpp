// The registry's descriptions (describe_model): read off the registry's thread, and read once per
// file identity. The first case drives the registry actor itself with an offload queue the test
// holds, so "the registry answers while a describe is in progress" is shown by events, not by
// timing; the second goes through warm::runtime and shows, from what a describe answers, that an
// unchanged file is not parsed again and a changed one is.
#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "actors/registry_actor.hpp"
#include "support/runtime_fixture.hpp"
#include "support/test_files.hpp"
#include "warm/caf/messages.hpp"
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

}  // namespace

TEST_CASE("a describe's file work runs off the registry's thread: other requests are answered meanwhile") {
  test::temp_dir dir;
  REQUIRE(write_dense_model(dir / "repo/m/1/model.safetensors", {{16, 8}, activation::relu, 1}));
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  auto held = std::make_shared<held_tasks>();
  registry_config config;
  auto store = registry_store::open(dir / "state");
  REQUIRE(store);
  config.store = std::make_unique<registry_store>(std::move(*store));
  auto repository = model_repository::create({dir / "repo"});
  REQUIRE(repository);
  config.repository = std::make_shared<model_repository>(std::move(*repository));
  config.routes = std::make_shared<route_table>();
  config.time = std::make_shared<steady_clock>();
  config.offload = [held](std::function<void()> task) { held->push(std::move(task)); };
  auto registry = spawn_registry(system, std::move(config));

  auto [registered, registration] = promised<void>();
  caf::anon_send(registry, msg::register_model{"m", {"m"}, false, false, registered});
  REQUIRE(registration.wait_for(30s) == std::future_status::ready);
  REQUIRE(registration.get());

  auto [described, description] = promised<model_metadata>();
  caf::anon_send(registry, msg::describe_model{"m", described});
  auto task = held->take();  // the describe's work, held: the describe is in progress
  REQUIRE(task);
  auto [status_done, status] = promised<model_status>();
  caf::anon_send(registry, msg::get_status{"m", status_done});
  REQUIRE(status.wait_for(30s) == std::future_status::ready);  // answered while the describe waits
  CHECK(status.get()->state == model_state::not_loaded);
  CHECK(description.wait_for(0s) == std::future_status::timeout);  // not answered by the registry

  task();  // the worker's part: open, parse, answer
  REQUIRE(description.wait_for(30s) == std::future_status::ready);
  auto meta = description.get();
  REQUIRE(meta);
  CHECK(meta->input_width == 16);
  CHECK(meta->output_width == 8);
  CHECK(meta->activation == "relu");
  caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
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
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);  // in place: same inode
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
