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
  REQUIRE(f.loader->wait_started(2));  // a's load, then b's
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
  CHECK(f.rt->set_vmodel("v", "b", false, std::string("a")).get());
  CHECK_FALSE(f.rt->set_vmodel("fresh", "a", false, std::string("b")).get());  // nothing to compare with
  CHECK_FALSE(f.rt->set_vmodel("v2", "nope").get());                          // unknown target
  CHECK_FALSE(f.rt->set_vmodel("a", "b").get());                              // a model's id
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

TEST_CASE("a vmodel's pending target cannot be unregistered; deleting the vmodel drops auto-delete models") {
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
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "a") == model_state::not_found; }));  // a, auto-delete, dropped

  REQUIRE(f.rt->delete_vmodel("v").get());
  REQUIRE(eventually([&] { return test::state_of(*f.rt, "b") == model_state::not_found; }));
  CHECK(f.rt->list_models().get()->empty());
}
