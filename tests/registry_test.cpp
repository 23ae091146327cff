// Registration, status, listing and restart through warm::runtime (registry actor + SQLite).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <caf/all.hpp>

#include <filesystem>
#include <optional>
#include <type_traits>

#include "actors/protocol/registry_protocol.hpp"
#include "runtime/runtime_actors.hpp"
#include "support/runtime_fixture.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

namespace {

errc code_of(const expected<void>& r) {
  return r ? errc::internal : r.error().code;
}

// Asks the registry `m` as an actor does (msg::ask) and waits for the response: an R, or the
// error it carried.
template <class R, class Message>
expected<R> ask(caf::scoped_actor& self, const registry_actor& registry, Message m) {
  std::optional<expected<R>> out;
  auto request = self->request(registry, std::chrono::seconds(10), msg::ask<Message>{std::move(m)});
  auto failed = [&](caf::error& e) { out.emplace(from_caf_error(e)); };
  if constexpr (std::is_void_v<R>)
    request.receive([&]() { out.emplace(); }, failed);
  else
    request.receive([&](R& r) { out.emplace(std::move(r)); }, failed);
  return std::move(*out);
}

}  // namespace

TEST_CASE("registration is idempotent for the same info and refuses different info") {
  test::runtime_fixture f({"a", "b"});
  CHECK(f.rt->register_model("a", {"a"}).get());
  CHECK(f.rt->register_model("a", {"a"}).get());
  auto different = f.rt->register_model("a", {"b"}).get();
  REQUIRE_FALSE(different);
  CHECK(different.error().code == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("a", {"a", 1}).get()) ==
        errc::invalid_argument);  // version differs
  CHECK(f.rt->register_model("versioned", {"b", 1}).get());
  CHECK(f.rt->register_model("versioned", {"b", 1}).get());
}

TEST_CASE("paths that leave the repository, bad ids and bad files are refused with clear errors") {
  test::runtime_fixture f({"a"});
  auto outside = f.dir / "outside/m/1/model.safetensors";
  REQUIRE(write_dense_model(outside, {{4, 2}, activation::none, 1}));
  std::filesystem::create_directory_symlink(f.dir / "outside/m", f.dir / "repo/escape");

  CHECK(code_of(f.rt->register_model("x", {"../outside/m"}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("x", {outside}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("x", {"escape"}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("x", {"missing"}).get()) == errc::not_found);
  CHECK(code_of(f.rt->register_model("x", {""}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("", {"a"}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("has space", {"a"}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model("a/b", {"a"}).get()) == errc::invalid_argument);
  CHECK(code_of(f.rt->register_model(std::string(257, 'x'), {"a"}).get()) ==
        errc::invalid_argument);

  test::write_file(f.dir / "repo/bad/1/model.safetensors", "not a safetensors file at all");
  auto bad = f.rt->register_model("bad", {"bad"}).get();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_argument);

  CHECK(f.rt->list_models().get()->empty());  // nothing was registered by the failures
  CHECK(code_of(f.rt->unregister_model("nope").get()) == errc::not_found);
}

// A registered model's directory or file swapped for a symlink after registration: every load and
// description opens the file beneath the repository root again, so nothing outside is read.
TEST_CASE("a model swapped for a symlink leading outside after registration is never loaded") {
  test::runtime_fixture f({"m", "n"});
  f.register_all();
  REQUIRE(
      write_dense_model(f.dir / "outside/m/1/model.safetensors", {{16, 8}, activation::none, 1}));
  test::write_file(f.dir / "outside/secret", "root:*:20000:0:99999:7:::\n");

  namespace fs = std::filesystem;
  fs::rename(f.dir / "repo/m/1", f.dir / "repo/m/1.old");
  fs::create_directory_symlink(f.dir / "outside/m/1", f.dir / "repo/m/1");
  auto loaded = f.rt->ensure_loaded("m", true).get();
  REQUIRE_FALSE(loaded);
  CHECK(loaded.error().code == errc::load_failed);
  CHECK_THAT(loaded.error().message, Catch::Contains("outside the repository root"));
  auto described = f.rt->describe("m").get();
  REQUIRE_FALSE(described);
  CHECK_THAT(described.error().message, Catch::Contains("outside the repository root"));
  CHECK(f.loader->loads_of("m") == 1);  // the loader ran and refused: the check is at load time

  fs::remove(f.dir / "repo/n/1/model.safetensors");
  fs::create_symlink(f.dir / "outside/secret", f.dir / "repo/n/1/model.safetensors");
  auto secret = f.rt->ensure_loaded("n", true).get();
  REQUIRE_FALSE(secret);
  CHECK_THAT(secret.error().message, Catch::Contains("outside the repository root") &&
                                         !Catch::Contains("root:") &&
                                         !Catch::Contains("header length"));
  CHECK_THAT(f.rt->describe("n").get().error().message,
             Catch::Contains("outside the repository root"));
  CHECK(f.rt->status("n").get()->state != model_state::loaded);
}

// The id rule, at its boundary: 256 bytes accepted, 257 refused; each refusal names the rule.
TEST_CASE(
    "model ids: 256 bytes accepted, 257, empty, spaces, '/', control and non-ASCII bytes refused") {
  test::runtime_fixture f({"a"});
  REQUIRE(f.rt->register_model(std::string(256, 'm'), {"a"}).get());
  auto longest = f.rt->status(std::string(256, 'm')).get();
  CHECK(longest->state == model_state::not_loaded);
  auto too_long = f.rt->register_model(std::string(257, 'm'), {"a"}).get();
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().code == errc::invalid_argument);
  CHECK_THAT(too_long.error().message, Catch::Contains("model id must be 1 to 256 bytes long"));
  for (const std::string& bad :
       {std::string("caf\xc3\xa9"), std::string("has space"), std::string("a/b"),
        std::string("tab\there"), std::string("del\x7f"), std::string("nul\0x", 5)}) {
    INFO("model id '" << bad << "'");
    auto r = f.rt->register_model(bad, {"a"}).get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message,
               Catch::Contains("may hold only printable ASCII without spaces or '/'"));
  }
  auto empty = f.rt->register_model("", {"a"}).get();
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.error().message, Catch::Contains("1 to 256 bytes"));
  CHECK(f.rt->list_models().get()->size() == 1);
}

// A path that a C string would cut short ("a" then NUL then anything) must not register as "a".
TEST_CASE("a registered path holding a NUL byte is refused, and nothing is stored") {
  test::runtime_fixture f({"a"});
  for (const std::string& bad : {std::string("a\0", 2), std::string("a\0/../../etc", 13)}) {
    auto r = f.rt->register_model("m", {bad}).get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK(r.error().message == "model paths may not contain NUL bytes");
  }
  CHECK(f.rt->list_models().get()->empty());
  CHECK(f.rt->status("m").get()->state == model_state::not_found);
  REQUIRE(f.rt->register_model("m", {"a"}).get());  // the id was not taken
}

// A real FIFO (mkfifo) as the model file: opening it for reading would block until a writer came.
// Registration refuses it, and one swapped in after registration fails the load and the describe,
// each answered at once (the test would hang on the future otherwise).
TEST_CASE(
    "a FIFO as the model file is refused at registration, load and describe without blocking") {
  test::runtime_fixture f({"m"});
  namespace fs = std::filesystem;
  fs::create_directories(f.dir / "repo/pipe/1");
  REQUIRE(::mkfifo((f.dir / "repo/pipe/1/model.safetensors").c_str(), 0600) == 0);
  auto pipe = f.rt->register_model("pipe", {"pipe"}).get();
  REQUIRE_FALSE(pipe);
  CHECK(pipe.error().code == errc::invalid_argument);
  CHECK_THAT(pipe.error().message, Catch::Contains("not a regular file"));

  f.register_all();
  fs::remove(f.dir / "repo/m/1/model.safetensors");
  REQUIRE(::mkfifo((f.dir / "repo/m/1/model.safetensors").c_str(), 0600) == 0);
  auto loaded = f.rt->ensure_loaded("m", true).get();
  REQUIRE_FALSE(loaded);
  CHECK(loaded.error().code == errc::load_failed);
  CHECK_THAT(loaded.error().message, Catch::Contains("not a regular file"));
  auto described = f.rt->describe("m").get();
  REQUIRE_FALSE(described);
  CHECK(described.error().code == errc::load_failed);
  CHECK_THAT(described.error().message, Catch::Contains("not a regular file"));
}

TEST_CASE("status of unknown, idle and loaded models; paged listing") {
  test::runtime_fixture f({"a", "b", "c"});
  f.register_all();
  CHECK(f.rt->status("zzz").get()->state == model_state::not_found);
  auto idle = f.rt->status("b").get();
  CHECK(idle->state == model_state::not_loaded);
  CHECK(idle->bytes == test::small_model_bytes);
  CHECK(idle->input_width == 16);
  CHECK(idle->output_width == 8);
  CHECK(idle->requests == 0);
  REQUIRE(f.rt->ensure_loaded("b", true).get());
  auto loaded = f.rt->status("b").get();
  CHECK(loaded->state == model_state::loaded);
  CHECK(loaded->device == "host");
  CHECK(loaded->requests == 1);
  CHECK(loaded->input_width == 16);
  CHECK(loaded->output_width == 8);

  auto page = f.rt->list_models("", 2).get();
  REQUIRE(page->size() == 2);
  CHECK((*page)[0].id == "a");
  CHECK((*page)[1].state == model_state::loaded);
  auto rest = f.rt->list_models("b", 2).get();
  REQUIRE(rest->size() == 1);
  CHECK((*rest)[0].id == "c");
}

TEST_CASE("a restarted runtime comes back with every registered model and vmodel") {
  test::runtime_fixture f({"a", "b", "c"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "b").get());
  REQUIRE(f.rt->unregister_model("c").get());
  f.stop();
  f.start();
  auto models = f.rt->list_models().get();
  REQUIRE(models->size() == 2);
  CHECK((*models)[0].id == "a");
  CHECK((*models)[1].id == "b");
  CHECK((*models)[0].bytes == test::small_model_bytes);  // resolved for the status, before any use
  CHECK((*models)[0].input_width == 16);
  CHECK((*models)[0].output_width == 8);
  auto v = f.rt->vmodel_status("v").get();
  REQUIRE(v);
  CHECK(v->active == "b");
  auto r = f.rt->infer({"v", {test::input()}}).get();
  REQUIRE(r);
  CHECK(r->model == "b");
  CHECK(code_of(f.rt->register_model("a", {"b"}).get()) ==
        errc::invalid_argument);  // still registered
}

TEST_CASE("registration with load_now loads in the background; sync waits for the load") {
  test::runtime_fixture f({"a", "b"});
  REQUIRE(f.rt->register_model("a", {"a"}, true).get());
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "a") == model_state::loaded; }));
  REQUIRE(f.rt->register_model("b", {"b"}, false, true).get());
  CHECK(test::state_of(*f.rt, "b") == model_state::loaded);
}

TEST_CASE("the registry refuses registrations past max_models") {
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2,
                          [](runtime_options& o) { o.max_models = 1; });
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  auto past = f.rt->register_model("b", {"b"}).get();
  REQUIRE_FALSE(past);
  CHECK(past.error().code == errc::capacity_exhausted);
  CHECK_THAT(past.error().message, Catch::Contains("limit of 1 models and vmodels"));
  CHECK(f.rt->register_model("a", {"a"}).get());  // idempotent re-registration still fine
}

TEST_CASE("unregistering during a load and registering again serves the new registration") {
  test::runtime_fixture f({"a"});
  f.register_all();
  f.loader->hold();
  auto first = f.rt->infer({"a", {test::input()}});
  REQUIRE(f.loader->wait_started(1));
  REQUIRE(f.rt->unregister_model("a").get());
  auto gone = first.get();  // answered at once, not after the load
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == errc::not_found);
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  auto second = f.rt->infer({"a", {test::input()}});
  f.loader->open_gate();
  auto served = second.get();
  REQUIRE(served);
  CHECK(served->model == "a");
  REQUIRE(eventually([&] { return f.rt->devices()[0]->used() == test::small_model_bytes; }));
  auto snapshot = f.rt->inspect().get();
  REQUIRE(snapshot->devices[0].resident.size() == 1);
  REQUIRE(f.rt->unregister_model("a").get());
  REQUIRE(eventually([&] { return f.rt->devices()[0]->used() == 0; }));
}

TEST_CASE("a size hint reserves headroom beyond the weights and may not undercut them") {
  test::runtime_fixture f({"a", "b"});
  auto small = f.rt->register_model("a", {"a", std::nullopt, test::small_model_bytes - 1}).get();
  CHECK(code_of(small) == errc::invalid_argument);
  REQUIRE(f.rt->register_model("b", {"b", std::nullopt, 4096}).get());
  auto served = f.rt->infer({"b", {test::input()}}).get();
  REQUIRE(served);
  CHECK(f.rt->status("b").get()->bytes == 4096);
  CHECK(f.rt->devices()[0]->used() == 4096);
  REQUIRE(f.rt->unregister_model("b").get());
  REQUIRE(eventually([&] { return f.rt->devices()[0]->used() == 0; }));
}

TEST_CASE("an actor's requests (msg::ask) are answered as responses, errors included") {
  test::runtime_fixture f({"a", "b"});
  auto actors = actors_of(*f.rt);
  caf::scoped_actor self{*actors.system};
  auto& registry = actors.registry;

  REQUIRE(ask<void>(self, registry, msg::register_model{"a", {"a"}, false, false, {}}));
  auto sync = ask<void>(self, registry, msg::register_model{"b", {"b"}, false, true, {}});
  REQUIRE_FALSE(sync);
  CHECK(sync.error().code == errc::invalid_argument);
  auto listed = ask<std::vector<model_status>>(self, registry, msg::list_models{"", 0, {}});
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);  // the refused sync registration left nothing behind
  CHECK((*listed)[0].id == "a");

  // A use is answered once the model is loaded.
  REQUIRE(ask<void>(self, registry, msg::use_model{"a", use_kind::wait, f.time->now(), nullptr}));
  CHECK(test::state_of(*f.rt, "a") == model_state::loaded);
  auto unknown =
      ask<void>(self, registry, msg::use_model{"nope", use_kind::wait, f.time->now(), nullptr});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == errc::not_found);

  auto set = ask<vmodel_status>(self, registry, msg::set_vmodel{"v", "a", false, std::nullopt, {}});
  REQUIRE(set);
  CHECK(set->active == "a");
  CHECK(set->state == vmodel_state::defined);
  auto got = ask<vmodel_status>(self, registry, msg::get_vmodel_status{"v", {}});
  REQUIRE(got);
  CHECK(got->active == "a");
  CHECK(got->active_state == model_state::loaded);
  REQUIRE(ask<void>(self, registry, msg::delete_vmodel{"v", {}}));
  auto gone = ask<vmodel_status>(self, registry, msg::get_vmodel_status{"v", {}});
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == errc::not_found);

  CHECK(ask<void>(self, registry, msg::retry_model{"a", {}}));
  CHECK(code_of(ask<void>(self, registry, msg::retry_model{"nope", {}})) == errc::not_found);
  REQUIRE(ask<void>(self, registry, msg::unregister_model{"a", {}}));
  CHECK(code_of(ask<void>(self, registry, msg::unregister_model{"a", {}})) == errc::not_found);
}
