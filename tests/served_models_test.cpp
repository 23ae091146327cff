// Served models through warm::runtime, on real files: versions found in a directory, a roll
// forward under load with no failed request, the resource-preserving gap, failed loads retried
// while the old version serves, labels, removal, a restart that serves at once, a configuration
// refused whole, and a model file written slowly that is never loaded half-written.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/runtime_fixture.hpp"
#include "support/test_files.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

namespace {

const std::string model_bytes = test::json_image(test::dense_header({16, 8}), (16 * 8 + 8) * 4);

struct served_fixture {
  explicit served_fixture(std::chrono::milliseconds settle = 30ms,
                          std::string device = "host:64KiB", std::chrono::milliseconds poll = 10ms)
      : settle(settle), device(std::move(device)), poll(poll) {
    std::filesystem::create_directories(dir / "repo");
    start();
  }
  void start() {
    runtime_options options;
    options.devices = {device};
    options.repositories = {dir / "repo"};
    options.state_dir = dir / "state";
    options.scheduler_threads = 2;
    options.inference_threads = 2;
    options.policy = "lru";
    options.version_poll = poll;
    options.version_settle = settle;
    auto made = runtime::create(options);
    REQUIRE(made);
    rt = std::move(*made);
  }
  void write_version(const std::string& model, std::uint64_t v,
                     const std::string& bytes = model_bytes) {
    test::write_file(dir / ("repo/" + model + "/" + std::to_string(v) + "/model.safetensors"),
                     bytes);
  }
  std::optional<served_model_status> status(const std::string& name) {
    auto all = rt->served().get();
    REQUIRE(all);
    for (auto& s : *all)
      if (s.config.name == name) return s;
    return std::nullopt;
  }
  std::vector<std::uint64_t> versions(const std::string& name) {
    std::vector<std::uint64_t> out;
    if (auto s = status(name))
      for (auto& v : s->versions)
        out.push_back(v.version);
    return out;
  }
  std::optional<std::uint64_t> default_of(const std::string& name) {
    auto s = status(name);
    return s ? s->default_version : std::nullopt;
  }
  std::string served_by(const std::string& target) {
    auto r = rt->infer({target, {test::input()}}).get();
    return r ? r->model : "error: " + r.error().to_string();
  }

  std::chrono::milliseconds settle;
  std::string device;
  std::chrono::milliseconds poll;
  test::temp_dir dir;
  std::unique_ptr<runtime> rt;
};

served_models_config one(const std::string& name, const std::string& policy = "latest:1",
                         load_policy loading = load_policy::availability_preserving) {
  served_model_config m;
  m.name = name;
  m.versions = parse_version_policy(policy).value();
  m.loading = loading;
  return {{m}};
}

// Infers `target` from a thread until stopped, counting what failed and which models served.
struct steady_client {
  steady_client(runtime& rt, std::string target) {
    thread = std::thread([this, &rt, target] {
      while (!stop) {
        auto r = rt.infer({target, {test::input()}}).get();
        ++requests;
        if (!r) {
          ++failed;
          std::lock_guard<std::mutex> lock(mutex);
          last_error = r.error().to_string();
        } else {
          std::lock_guard<std::mutex> lock(mutex);
          served.insert(r->model);
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  ~steady_client() { finish(); }
  void finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> requests{0}, failed{0};
  std::mutex mutex;
  std::set<std::string> served;
  std::string last_error;
  std::thread thread;
};

}  // namespace

TEST_CASE("a served model's versions come from its directory; its name serves the default") {
  served_fixture f;
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  CHECK(f.served_by("m") == "m@1");
  CHECK(f.served_by("m@1") == "m@1");
  auto s = f.status("m");
  REQUIRE(s);
  REQUIRE(s->versions.size() == 1);
  CHECK(s->versions[0].state == version_state::ready);
  CHECK(s->versions[0].aspired);
  CHECK(s->source_error.empty());
  CHECK(f.served_by("m@7").rfind("error: not_found", 0) == 0);
}

TEST_CASE("availability-preserving: a roll forward under load fails no request") {
  served_fixture f;
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));

  steady_client client(*f.rt, "m");
  REQUIRE(eventually([&] { return client.requests > 20; }));
  f.write_version("m", 2);
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; }));
  auto before = client.requests.load();
  REQUIRE(eventually([&] { return client.requests > before + 20; }));
  client.finish();
  INFO(client.last_error);
  CHECK(client.failed == 0);
  CHECK(client.served == std::set<std::string>{"m@1", "m@2"});
  CHECK(f.rt->metrics().version_rolls.value() == 2);  // to 1, then to 2
  CHECK(f.rt->metrics().served_models.value() == 1);
  CHECK(f.served_by("m@1").rfind("error: not_found", 0) == 0);  // unloaded and unregistered
}

TEST_CASE("resource-preserving: the old version goes first; the name finds none in between") {
  served_fixture f;
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m", "latest:1", load_policy::resource_preserving)).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  f.write_version("m", 2);
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; }));
  CHECK(f.served_by("m") == "m@2");
  CHECK(f.served_by("m@1").rfind("error: not_found", 0) == 0);
}

TEST_CASE("a version that fails to load is retried while the previous one serves") {
  served_fixture f;
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  f.write_version("m", 2, "not a model");
  REQUIRE(eventually([&] {
    auto s = f.status("m");
    return s && s->versions.size() == 2 && s->versions[1].state == version_state::error;
  }));
  auto s = f.status("m");
  CHECK(s->versions[1].failures >= 1);
  CHECK(f.rt->metrics().version_load_failures.value() >= 1);
  CHECK_FALSE(s->versions[1].error.empty());
  CHECK(s->versions[0].state == version_state::ready);  // unaspired, and still serving
  CHECK(f.served_by("m") == "m@1");
  // Mended in place: the next retry loads it and the roll completes.
  f.write_version("m", 2);
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; }));
  CHECK(f.served_by("m") == "m@2");
}

TEST_CASE("labels name ready versions and keep them aspired") {
  served_fixture f;
  f.write_version("m", 1);
  f.write_version("m", 2);
  auto config = one("m");
  config.models[0].labels["stable"] = 1;
  config.models[0].labels["canary"] = 2;
  REQUIRE(f.rt->serve(config).get());
  REQUIRE(eventually([&] {
    auto s = f.status("m");
    return s && s->labels.size() == 2 && s->default_version == 2u;
  }));
  CHECK(f.versions("m") == std::vector<std::uint64_t>{1, 2});  // 1 stays: a label names it
  CHECK(f.served_by("m@stable") == "m@1");
  CHECK(f.served_by("m@canary") == "m@2");
  CHECK(f.served_by("m") == "m@2");

  // The label moves: stable to 2; version 1 is no longer needed and goes.
  config.models[0].labels["stable"] = 2;
  REQUIRE(f.rt->serve(config).get());
  REQUIRE(eventually([&] { return f.versions("m") == std::vector<std::uint64_t>{2}; }));
  CHECK(f.served_by("m@stable") == "m@2");
}

TEST_CASE(
    "a model no longer served loses its versions and aliases; a refused configuration changes "
    "nothing") {
  served_fixture f;
  f.write_version("m", 1);
  f.write_version("n", 4);
  served_models_config both = one("m");
  both.models.push_back(one("n").models[0]);
  REQUIRE(f.rt->serve(both).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u && f.default_of("n") == 4u; }));

  auto bad = both;
  bad.models[1].name = "n@x";
  auto refused = f.rt->serve(bad).get();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK(f.served_by("n") == "n@4");

  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] {
    return !f.status("n") && f.served_by("n").rfind("error: not_found", 0) == 0 &&
           f.served_by("n@4").rfind("error: not_found", 0) == 0;
  }));
  CHECK(f.served_by("m") == "m@1");
}

TEST_CASE("after a restart the name serves at once, then the roll goes on") {
  served_fixture f;
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  f.rt.reset();
  f.write_version("m", 2);
  f.start();
  CHECK(f.served_by("m") == "m@1");  // before any configuration: the alias the last run left
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; }));
  CHECK(f.served_by("m") == "m@2");
}

TEST_CASE("a model file written slowly is not loaded before it is complete") {
  served_fixture f(300ms);
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  auto path = f.dir / "repo/m/2/model.safetensors";
  std::filesystem::create_directories(f.dir / "repo/m/2");
  {
    std::ofstream out(path, std::ios::binary);
    for (std::size_t i = 0; i < model_bytes.size(); i += 64) {
      out.write(model_bytes.data() + i,
                static_cast<std::streamsize>(std::min<std::size_t>(64, model_bytes.size() - i)));
      out.flush();
      std::this_thread::sleep_for(20ms);  // far longer than the poll, shorter than the settle time
      auto s = f.status("m");
      REQUIRE(s);
      for (auto& v : s->versions)
        CHECK(v.state != version_state::error);
      CHECK(s->default_version == 1u);
    }
  }
  REQUIRE(eventually([&] { return f.default_of("m") == 2u; }));
  auto s = f.status("m");
  for (auto& v : s->versions)
    CHECK(v.failures == 0);
}

TEST_CASE("while a new version loads, the version that serves is pinned: room is made elsewhere") {
  // Room for two models: m@1 and x. LRU would evict m@1 for m@2 (x was used after it).
  served_fixture f(30ms, "host:1100B");
  f.write_version("m", 1);
  test::write_file(f.dir / "repo/x/1/model.safetensors", model_bytes);
  REQUIRE(f.rt->serve(one("m")).get());
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }));
  CHECK(f.served_by("m") == "m@1");
  REQUIRE(f.rt->register_model("x", model_info("x"), false, true).get());
  CHECK(f.served_by("x") == "x");
  CHECK(test::state_of(*f.rt, "m@1") == model_state::loaded);

  f.write_version("m", 2);
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; }));
  CHECK(test::state_of(*f.rt, "x") == model_state::not_loaded);  // x made room, not m@1
  CHECK(test::state_of(*f.rt, "m@2") == model_state::loaded);
  // The pin is gone: m@2 may be evicted like any model.
  CHECK(f.served_by("x") == "x");
  CHECK(test::state_of(*f.rt, "m@2") == model_state::loaded);  // room for both again (m@1 left)
  REQUIRE(f.rt->register_model("y", model_info("x"), false, true).get());
  CHECK(f.served_by("y") == "y");
  CHECK(test::state_of(*f.rt, "m@2") == model_state::not_loaded);  // the LRU victim
}

TEST_CASE(
    "a directory that leads outside the repository, or is missing, serves nothing and says why") {
  served_fixture f;
  test::temp_dir outside;
  test::write_file(outside / "1/model.safetensors", model_bytes);
  std::filesystem::create_symlink(outside.path(), f.dir / "repo/escape");
  auto config = one("escape");
  config.models.push_back(one("missing").models[0]);
  REQUIRE(f.rt->serve(config).get());
  REQUIRE(eventually([&] {
    auto e = f.status("escape"), m = f.status("missing");
    return e && m && !e->source_error.empty() && !m->source_error.empty();
  }));
  auto e = f.status("escape");
  CHECK(e->source_error.find("outside the repository root") != std::string::npos);
  CHECK(e->versions.empty());
  CHECK_FALSE(e->default_version);
  CHECK(f.status("missing")->source_error.find("not found") != std::string::npos);
  CHECK(f.served_by("escape@1").rfind("error: not_found", 0) == 0);
  // The directory appears: its versions are served from the next look.
  f.write_version("missing", 3);
  REQUIRE(eventually([&] { return f.default_of("missing") == 3u; }));
  CHECK(f.status("missing")->source_error.empty());
}

TEST_CASE("a change in a served model's directory is seen at once, not at the next poll") {
  served_fixture f(30ms, "host:64KiB", std::chrono::hours(1));  // no poll within the test
  f.write_version("m", 1);
  REQUIRE(f.rt->serve(one("m")).get());  // the first look is made at once
  REQUIRE(eventually([&] { return f.default_of("m") == 1u; }, 5s));
  f.write_version("m", 2);  // a new version directory: the watch on m/ sees it
  REQUIRE(eventually(
      [&] { return f.default_of("m") == 2u && f.versions("m") == std::vector<std::uint64_t>{2}; },
      5s));
  std::filesystem::create_directories(f.dir /
                                      "repo/m/3");  // an empty version directory, filled later
  std::this_thread::sleep_for(50ms);
  test::write_file(f.dir / "repo/m/3/model.safetensors",
                   model_bytes);  // seen through m/3's own watch
  REQUIRE(eventually([&] { return f.default_of("m") == 3u; }, 5s));
}

TEST_CASE(
    "a forced label moves as soon as its version loads; an unforced one waits for it to be ready") {
  // Version 2 can never fit the device: its load fails (model_too_large), again at each retry.
  served_fixture f(30ms, "host:2KiB");
  f.write_version("m", 1);
  f.write_version("m", 2, test::json_image(test::dense_header({64, 64}), (64 * 64 + 64) * 4));
  auto config = one("m", "all");
  config.models[0].labels["canary"] = 2;
  config.models[0].labels["stable"] = 1;
  REQUIRE(f.rt->serve(config).get());
  REQUIRE(eventually([&] {
    auto s = f.status("m");
    return s && s->versions.size() == 2 && s->versions[1].state == version_state::error &&
           s->labels.count("stable");
  }));
  CHECK_FALSE(f.status("m")->labels.count("canary"));
  CHECK(f.served_by("m@canary").rfind("error: not_found", 0) == 0);
  CHECK(f.served_by("m") == "m@1");

  config.models[0].force_labels = true;
  REQUIRE(f.rt->serve(config).get());
  REQUIRE(eventually([&] {
    auto s = f.status("m");
    return s && s->labels.count("canary") && s->labels.at("canary") == 2u;
  }));
  CHECK(f.served_by("m@canary").rfind("error: model_too_large", 0) ==
        0);  // the label's version answers
  CHECK(f.served_by("m") == "m@1");
}
