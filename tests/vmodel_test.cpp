// VModels: the active model serves until the target is loaded, then the alias flips; failed
// transitions, compare-and-set, auto-delete and deletion. Driven through warm::runtime.
#include <catch2/catch.hpp>

#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

namespace {

std::string served_by(runtime& rt, const std::string& target) {
  auto r = rt.infer({target, {test::input()}}).get();
  return r ? r->model : "error: " + r.error().to_string();
}

vmodel_state vstate(runtime& rt, const std::string& id) {
  auto v = rt.vmodel_status(id).get();
  return v ? v->state : vmodel_state::not_found;
}

}  // namespace

TEST_CASE("the active model keeps serving until the target is loaded, then the alias flips") {
  test::runtime_fixture f({"a", "b"});
  f.register_all();
  auto created = f.rt->set_vmodel("v", "a").get();
  REQUIRE(created);
  CHECK(created->state == vmodel_state::defined);
  CHECK(created->active == "a");
  CHECK(served_by(*f.rt, "v") == "a");

  f.loader->hold();
  auto moving = f.rt->set_vmodel("v", "b").get();
  REQUIRE(moving);
  CHECK(moving->state == vmodel_state::transitioning);
  CHECK(moving->active == "a");
  CHECK(moving->target == "b");
  REQUIRE(f.loader->wait_started(2));   // a's load, then b's
  CHECK(served_by(*f.rt, "v") == "a");  // b is still loading
  auto during = f.rt->vmodel_status("v").get();
  CHECK(during->active_state == model_state::loaded);
  CHECK(during->target_state == model_state::loading);

  f.loader->open_gate();
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::defined; }));
  auto after = f.rt->vmodel_status("v").get();
  CHECK(after->active == "b");
  CHECK(after->target == "b");
  CHECK(served_by(*f.rt, "v") == "b");
}

TEST_CASE("a target that fails to load leaves TRANSITION_FAILED and the active model serving") {
  test::runtime_fixture f({"a", "bad"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a").get());
  f.loader->fail("bad");
  REQUIRE(f.rt->set_vmodel("v", "bad").get());
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::transition_failed; }));
  auto v = f.rt->vmodel_status("v").get();
  CHECK(v->active == "a");
  CHECK(v->target == "bad");
  REQUIRE(v->error);
  CHECK(v->error->code == errc::load_failed);
  CHECK(served_by(*f.rt, "v") == "a");
  // Pointing it back at the active model settles it again.
  auto back = f.rt->set_vmodel("v", "a").get();
  REQUIRE(back);
  CHECK(back->state == vmodel_state::defined);
}

TEST_CASE("setVModel with an expected target is a compare-and-set") {
  test::runtime_fixture f({"a", "b", "c"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a").get());
  auto wrong = f.rt->set_vmodel("v", "b", false, std::string("c")).get();
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == errc::invalid_argument);
  CHECK_THAT(wrong.error().message,
             Catch::Contains("targets 'a'") && Catch::Contains("expected 'c'"));
  CHECK(f.rt->set_vmodel("v", "b", false, std::string("a")).get());
}

// Every refusal of setVModel / deleteVModel with its exact code and what its message names.
TEST_CASE("vmodel errors carry their documented code and name what is wrong") {
  test::runtime_fixture f({"a", "b"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a").get());
  auto error_of = [](const expected<vmodel_status>& r) {
    REQUIRE_FALSE(r);
    return r.error();
  };
  auto fresh = error_of(
      f.rt->set_vmodel("fresh", "a", false, std::string("b")).get());  // nothing to compare
  CHECK(fresh.code == errc::invalid_argument);
  CHECK_THAT(fresh.message, Catch::Contains("'fresh' does not exist") && Catch::Contains("'b'"));
  auto unknown = error_of(f.rt->set_vmodel("v2", "nope").get());
  CHECK(unknown.code == errc::not_found);
  CHECK_THAT(unknown.message, Catch::Contains("no model 'nope'"));
  auto model_id = error_of(f.rt->set_vmodel("a", "b").get());
  CHECK(model_id.code == errc::invalid_argument);
  CHECK_THAT(model_id.message, Catch::Contains("'a' is a model id"));
  auto gone = f.rt->delete_vmodel("never").get();
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == errc::not_found);
  CHECK_THAT(gone.error().message, Catch::Contains("'never'"));
  auto status = f.rt->vmodel_status("never").get();
  REQUIRE_FALSE(status);
  CHECK(status.error().code == errc::not_found);
  // A model id that is a vmodel's is refused too.
  auto taken = f.rt->register_model("v", {"b"}).get();
  REQUIRE_FALSE(taken);
  CHECK(taken.error().code == errc::invalid_argument);
  CHECK_THAT(taken.error().message, Catch::Contains("'v' is a vmodel id"));
  // None of the refusals changed anything: v still serves a, and no vmodel was made.
  CHECK(f.rt->vmodel_status("v").get()->active == "a");
  CHECK_FALSE(f.rt->vmodel_status("fresh").get());
  CHECK(f.rt->inspect().get()->vmodels == 1);
}

// The id rule holds for vmodels as for models: 1..256 bytes of printable ASCII, no space or '/'.
TEST_CASE("vmodel ids follow the id rule: 256 bytes accepted, 257 and non-ASCII refused") {
  test::runtime_fixture f({"a"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel(std::string(256, 'v'), "a").get());
  for (const std::string& bad :
       {std::string(257, 'v'), std::string(""), std::string("has space"), std::string("a/b"),
        std::string("caf\xc3\xa9"), std::string("tab\there"), std::string("del\x7f")}) {
    INFO("vmodel id '" << bad << "'");
    auto r = f.rt->set_vmodel(bad, "a").get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains("vmodel id"));
  }
  CHECK(f.rt->inspect().get()->vmodels == 1);
}

// max_models bounds models and vmodels together: exactly the limit is accepted, one past refused.
TEST_CASE("vmodels count toward max_models") {
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2,
                          [](runtime_options& o) { o.max_models = 3; });
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  REQUIRE(f.rt->set_vmodel("v1", "a").get());
  REQUIRE(f.rt->set_vmodel("v2", "a").get());  // the third: exactly the limit
  auto past = f.rt->set_vmodel("v3", "a", true).get();
  REQUIRE_FALSE(past);
  CHECK(past.error().code == errc::capacity_exhausted);
  CHECK_THAT(past.error().message, Catch::Contains("limit of 3 models and vmodels"));
  auto model_past = f.rt->register_model("b", {"b"}).get();
  REQUIRE_FALSE(model_past);
  CHECK(model_past.error().code == errc::capacity_exhausted);
  // Moving an existing vmodel takes no room; deleting one frees it.
  REQUIRE(f.rt->set_vmodel("v1", "a").get());
  REQUIRE(f.rt->delete_vmodel("v2").get());
  CHECK(f.rt->set_vmodel("v3", "a").get());
  CHECK_FALSE(f.rt->set_vmodel("v4", "a").get());
  // The refused set_vmodel with auto-delete did not mark a: deleting every vmodel leaves it.
  REQUIRE(f.rt->delete_vmodel("v1").get());
  REQUIRE(f.rt->delete_vmodel("v3").get());
  CHECK(test::state_of(*f.rt, "a") != model_state::not_found);
}

TEST_CASE("models a vmodel uses cannot be unregistered; auto-delete targets go when unreferenced") {
  test::runtime_fixture f({"a", "b", "c"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a").get());
  auto refused = f.rt->unregister_model("a").get();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);

  REQUIRE(f.rt->set_vmodel("v", "b", true).get());  // b is auto-delete
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::defined; }));
  CHECK(f.rt->vmodel_status("v").get()->active == "b");
  CHECK(test::state_of(*f.rt, "a") != model_state::not_found);  // a was not marked auto-delete

  REQUIRE(f.rt->set_vmodel("v", "c").get());
  REQUIRE(eventually([&] { return f.rt->vmodel_status("v").get()->active == "c"; }));
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "b") == model_state::not_found; }));

  REQUIRE(f.rt->delete_vmodel("v").get());
  CHECK(vstate(*f.rt, "v") == vmodel_state::not_found);
  CHECK_FALSE(f.rt->delete_vmodel("v").get());
  CHECK(f.rt->unregister_model("a").get());
  CHECK(served_by(*f.rt, "v").rfind("error: not_found", 0) == 0);
}

TEST_CASE("a transition cut short by a restart resumes: the alias flips once the target loads") {
  test::runtime_fixture f({"a", "b"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a").get());
  f.loader->fail("b");
  REQUIRE(f.rt->set_vmodel("v", "b").get());
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::transition_failed; }));

  // The disk holds active a, target b. After a restart nothing but the registry can move it on.
  f.stop();
  f.loader->fail("b", false);
  f.start();
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::defined; }));
  auto v = f.rt->vmodel_status("v").get();
  CHECK(v->active == "b");
  CHECK(served_by(*f.rt, "v") == "b");

  // And the flip itself is durable.
  f.stop();
  f.start();
  CHECK(vstate(*f.rt, "v") == vmodel_state::defined);
  CHECK(f.rt->vmodel_status("v").get()->active == "b");
}

TEST_CASE(
    "a vmodel's pending target cannot be unregistered; deleting the vmodel drops auto-delete "
    "models") {
  test::runtime_fixture f({"a", "b"});
  f.register_all();
  REQUIRE(f.rt->set_vmodel("v", "a", true).get());
  f.loader->hold();
  REQUIRE(f.rt->set_vmodel("v", "b", true).get());
  auto refused = f.rt->unregister_model("b").get();  // the target only, not yet active
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  f.loader->open_gate();
  REQUIRE(eventually([&] { return vstate(*f.rt, "v") == vmodel_state::defined; }));
  REQUIRE(eventually([&] {
    return test::state_of(*f.rt, "a") == model_state::not_found;
  }));  // a, auto-delete, dropped

  REQUIRE(f.rt->delete_vmodel("v").get());
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "b") == model_state::not_found; }));
  CHECK(f.rt->list_models().get()->empty());
}
