// Served models' plain logic: version policies, the aspired-versions rules step by step (as
// TensorFlow Serving's own policy tests walk them), the default version, the configuration
// check, and when a version directory counts as complete.
#include <catch2/catch.hpp>

#include "core/version_rules.hpp"
#include "core/version_settler.hpp"
#include "warm/versions.hpp"

using namespace warm;
using namespace std::chrono_literals;

namespace {

constexpr auto new_ = version_state::new_;
constexpr auto loading = version_state::loading;
constexpr auto ready = version_state::ready;
constexpr auto unloading = version_state::unloading;
constexpr auto failed = version_state::error;

std::optional<version_action> next(load_policy p, std::vector<version_snapshot> v) {
  return next_version_action(p, v);
}
version_action load(std::uint64_t v) {
  return {version_action::kind::load, v};
}
version_action unload(std::uint64_t v) {
  return {version_action::kind::unload, v};
}

constexpr auto availability = load_policy::availability_preserving;
constexpr auto resource = load_policy::resource_preserving;

}  // namespace

TEST_CASE("version policies parse, print and select") {
  auto latest = parse_version_policy("latest");
  REQUIRE(latest);
  CHECK(to_string(*latest) == "latest:1");
  auto three = parse_version_policy("latest:3");
  REQUIRE(three);
  CHECK(three->latest == 3);
  auto all = parse_version_policy("all");
  REQUIRE(all);
  CHECK(to_string(*all) == "all");
  auto specific = parse_version_policy("specific:3,1,3");
  REQUIRE(specific);
  CHECK(specific->specific == std::vector<std::uint64_t>{1, 3});
  CHECK(to_string(*specific) == "specific:1,3");

  for (auto bad : {"", "latest:", "latest:0", "latest:x", "latest:1001", "latest:-1",
                   "specific:", "specific:0", "specific:1,", "specific:1,a", "newest", "all:2"}) {
    INFO(bad);
    auto r = parse_version_policy(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
  }

  CHECK(select_versions(*latest, {1, 5, 3}) == std::vector<std::uint64_t>{5});
  CHECK(select_versions(*three, {1, 5, 3, 4}) == std::vector<std::uint64_t>{3, 4, 5});
  CHECK(select_versions(*three, {2}) == std::vector<std::uint64_t>{2});
  CHECK(select_versions(*all, {4, 2}) == std::vector<std::uint64_t>{2, 4});
  CHECK(select_versions(*specific, {2, 3, 4}) == std::vector<std::uint64_t>{3});
  CHECK(select_versions(*latest, {}).empty());
}

// latest:N takes N up to 1000, the documented maximum, inclusive; one more is refused, and the
// refusal names the bound.
TEST_CASE("latest:1000 is the largest count taken") {
  auto most = parse_version_policy("latest:1000");
  if (!most) FAIL(most.error().message);
  CHECK(most->which == version_policy::kind::latest);
  CHECK(most->latest == 1000);
  CHECK(to_string(*most) == "latest:1000");
  auto over = parse_version_policy("latest:1001");
  REQUIRE_FALSE(over);
  CHECK(over.error().code == errc::invalid_argument);
  CHECK_THAT(over.error().message, Catch::Contains("1001") && Catch::Contains("1000"));
}

TEST_CASE("load policies parse") {
  CHECK(parse_load_policy("availability-preserving").value() == availability);
  CHECK(parse_load_policy("resource-preserving").value() == resource);
  CHECK_FALSE(parse_load_policy("availability"));
  CHECK(to_string(resource) == "resource-preserving");
}

TEST_CASE("availability-preserving: a roll from version 1 to 2, one step at a time") {
  // 2 appears; 1 leaves the policy (latest:1) but serves until 2 is ready.
  CHECK(next(availability, {{1, ready, false}, {2, new_, true}}) == load(2));
  CHECK_FALSE(next(availability, {{1, ready, false}, {2, loading, true}}));
  CHECK(next(availability, {{1, ready, false}, {2, ready, true}}) == unload(1));
  CHECK_FALSE(next(availability, {{1, unloading, false}, {2, ready, true}}));
  CHECK_FALSE(next(availability, {{2, ready, true}}));
}

TEST_CASE("availability-preserving: the rules' corners") {
  SECTION("nothing aspired: unload the lowest ready") {
    CHECK(next(availability, {{3, ready, false}, {2, ready, false}}) == unload(2));
  }
  SECTION("an aspired version is ready: unaspired ones go, lowest first") {
    CHECK(next(availability,
               {{1, ready, true}, {3, ready, false}, {2, ready, false}, {4, new_, true}}) ==
          unload(2));
  }
  SECTION("two unaspired ready while the aspired one loads: the lowest goes, one stays serving") {
    CHECK(next(availability, {{1, ready, false}, {2, ready, false}, {3, loading, true}}) ==
          unload(1));
    CHECK_FALSE(next(availability, {{1, unloading, false}, {2, ready, false}, {3, loading, true}}));
  }
  SECTION("the highest new aspired version loads first") {
    CHECK(next(availability, {{1, new_, true}, {3, new_, true}, {2, new_, true}}) == load(3));
    CHECK(next(availability, {{1, new_, true}, {3, loading, true}, {2, new_, true}}) == load(2));
  }
  SECTION(
      "a failed version is not loaded again by the rules (the manager's back-off makes it new)") {
    CHECK_FALSE(next(availability, {{1, ready, false}, {2, failed, true}}));
  }
  SECTION("an aspired version that is ready is not unloaded") {
    CHECK_FALSE(next(availability, {{1, ready, true}, {2, ready, true}}));
  }
}

// "An aspired version is ready" looks at every aspired version, wherever it stands in the list:
// one ready aspired version is enough for the unaspired ones to go, even when an aspired version
// examined after it is still new, loading or failed.
TEST_CASE(
    "availability-preserving: any ready aspired version counts, not only the last one listed") {
  for (auto pending : {new_, loading, failed}) {
    INFO("the other aspired version is " << std::string(to_string(pending)));
    CHECK(next(availability, {{2, ready, true}, {3, pending, true}, {1, ready, false}}) ==
          unload(1));
    CHECK(next(availability, {{1, ready, false}, {2, ready, true}, {3, pending, true}}) ==
          unload(1));
    CHECK(next(availability, {{3, pending, true}, {1, ready, false}, {2, ready, true}}) ==
          unload(1));
  }
}

TEST_CASE("resource-preserving: the old version goes before the new one loads") {
  CHECK(next(resource, {{1, ready, false}, {2, new_, true}}) == unload(1));
  CHECK_FALSE(next(resource, {{1, unloading, false}, {2, new_, true}}));
  CHECK_FALSE(next(resource, {{1, loading, false}, {2, new_, true}}));  // finishes, then goes
  CHECK(next(resource, {{2, new_, true}}) == load(2));
  CHECK_FALSE(next(resource, {{2, loading, true}}));
  SECTION("a failed unaspired version is finished") {
    CHECK(next(resource, {{1, failed, false}, {2, new_, true}}) == load(2));
  }
  SECTION("the lowest of several unaspired goes first") {
    CHECK(next(resource, {{3, ready, false}, {1, ready, false}, {4, new_, true}}) == unload(1));
  }
}

TEST_CASE("the default version: the highest ready aspired one, else the highest ready") {
  CHECK(default_version({{1, ready, false}, {2, ready, true}, {3, loading, true}}) == 2u);
  CHECK(default_version({{1, ready, false}, {2, ready, false}, {3, failed, true}}) == 2u);
  CHECK(default_version({{4, ready, false}, {2, ready, true}}) == 2u);
  CHECK_FALSE(default_version({{1, new_, true}, {2, unloading, false}}));
}

TEST_CASE("a served models configuration is checked whole") {
  served_model_config m;
  m.name = "mnist";
  served_models_config ok{{m}};
  CHECK(check_served_models(ok));

  auto refused = [&](served_model_config c, const std::string& says) {
    INFO(says);
    auto r = check_served_models({{c}});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK(r.error().message.find(says) != std::string::npos);
  };
  auto c = m;
  c.name = "a@b";
  refused(c, "may not hold '@'");
  c = m;
  c.name = "";
  refused(c, "1 to 256 bytes");
  c = m;
  c.base_path = "../other";
  refused(c, "'..'");
  c = m;
  c.base_path = "/abs";
  refused(c, "relative");
  c = m;
  c.base_path = "a//b";
  refused(c, "empty part");
  c = m;
  c.base_path = "https://files.example/models/mnist";
  refused(c, "cannot be listed");
  c = m;
  c.base_path = "s3://bucket/../other";
  refused(c, "'..'");
  c = m;
  c.base_path = "s3://";
  refused(c, "names no bucket");
  c = m;
  c.base_path = "S3://bucket/models/mnist";  // an S3 model directory: listed for its versions
  CHECK(check_served_models({{c}}));
  c = m;
  c.labels["7"] = 1;
  refused(c, "is a number");
  c = m;
  c.labels["007"] = 1;  // not a version's name, but a request for version 7 would read it so
  refused(c, "is a number");
  c = m;
  c.labels["stable"] = 0;
  refused(c, "version 0");
  c = m;
  c.labels["st@ble"] = 1;
  refused(c, "may not hold '@'");
  c = m;
  c.versions.which = version_policy::kind::specific;
  refused(c, "name none");
  c = m;
  c.name = std::string(250, 'x');
  refused(c, "too long");

  auto twice = check_served_models({{m, m}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message.find("listed twice") != std::string::npos);
  c = m;
  c.base_path = "models/mnist";
  c.labels["stable"] = 3;
  CHECK(check_served_models({{c}}));
  CHECK(version_id("mnist", 3) == "mnist@3");
  CHECK(label_id("mnist", "stable") == "mnist@stable");
}

TEST_CASE("a version is taken once its model file has stopped changing") {
  const std::int64_t wall = 1'000'000'000'000;  // the file clock "now" at the first look
  auto file = [](std::uint64_t v, std::uint64_t size, std::int64_t mtime) {
    version_file f;
    f.version = v;
    f.path = "/r/m/" + std::to_string(v) + "/model.safetensors";
    f.size = size;
    f.mtime_ns = mtime;
    f.inode = 10 + v;
    return f;
  };
  version_settler settler(1s);
  const auto second = std::chrono::nanoseconds(1s).count();

  SECTION("a file written just now waits for a second look a settle time later") {
    CHECK(settler.take({file(1, 100, wall)}, 0s, wall).empty());
    CHECK(settler.pending() == 1);
    CHECK(settler.take({file(1, 100, wall)}, 999ms, wall + second).empty());  // too soon
    CHECK(settler.take({file(1, 100, wall)}, 1s, wall + second) == std::vector<std::uint64_t>{1});
    CHECK(settler.pending() == 0);
  }
  SECTION("a file that grows between looks starts over") {
    CHECK(settler.take({file(1, 100, wall)}, 0s, wall).empty());
    CHECK(settler.take({file(1, 200, wall + second)}, 1s, wall + second).empty());
    CHECK(settler.take({file(1, 200, wall + second)}, 1500ms, wall + second).empty());
    CHECK(settler.take({file(1, 200, wall + second)}, 2s, wall + 2 * second) ==
          std::vector<std::uint64_t>{1});
  }
  SECTION("a file last written a settle time ago is taken at the first look (a restart)") {
    CHECK(settler.take({file(1, 100, wall - second), file(2, 100, wall)}, 0s, wall) ==
          std::vector<std::uint64_t>{1});
  }
  SECTION(
      "a settled version stays while present, is forgotten when gone, and starts over if it "
      "returns") {
    CHECK(settler.take({file(1, 100, wall - second)}, 0s, wall) == std::vector<std::uint64_t>{1});
    CHECK(settler.take({file(1, 300, wall)}, 1s, wall) ==
          std::vector<std::uint64_t>{1});  // rewritten in place
    CHECK(settler.take({}, 2s, wall).empty());
    CHECK(settler.take({file(1, 100, wall + 2 * second)}, 3s, wall + 2 * second).empty());
  }
  SECTION("a file replaced by a rename (a new inode) is a new file") {
    CHECK(settler.take({file(2, 100, wall)}, 0s, wall).empty());
    auto renamed = file(2, 100, wall + second / 2);
    renamed.inode = 99;
    CHECK(settler.take({renamed}, 500ms, wall + second / 2).empty());
    CHECK(settler.take({renamed}, 1400ms, wall + second + second / 3).empty());
    CHECK(settler.take({renamed}, 1500ms, wall + second + second / 2) ==
          std::vector<std::uint64_t>{2});
  }
  SECTION("a version renamed into place complete, written long ago, is taken at once") {
    CHECK(settler.take({file(3, 100, wall - 60 * second)}, 0s, wall) ==
          std::vector<std::uint64_t>{3});
  }
}
