// Repository layout <root>/<model>/<version>/model.safetensors and path confinement.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/test_files.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"

namespace fs = std::filesystem;

namespace {

void make_model(const std::string& path) {
  REQUIRE(warm::write_dense_model(path, {{4, 2}, warm::activation::relu, 1}));
}

}  // namespace

TEST_CASE("versions are positive integers and the highest is the default") {
  warm::test::temp_dir dir;
  make_model(dir / "mnist/1/model.safetensors");
  make_model(dir / "mnist/3/model.safetensors");
  make_model(dir / "mnist/10/model.safetensors");
  fs::create_directories(dir / "mnist/7");            // no model file: not a version
  make_model(dir / "mnist/007/model.safetensors");    // leading zero: not a version
  make_model(dir / "mnist/latest/model.safetensors");  // not numeric
  auto versions = warm::list_versions(dir / "mnist");
  REQUIRE(versions);
  CHECK(*versions == std::vector<std::uint64_t>{1, 3, 10});
  CHECK(warm::find_model_file(dir / "mnist").value() == dir / "mnist/10/model.safetensors");
  CHECK(warm::find_model_file(dir / "mnist", 3).value() == dir / "mnist/3/model.safetensors");
  CHECK(warm::find_model_file(dir / "mnist/1").value() == dir / "mnist/1/model.safetensors");
  CHECK(warm::find_model_file(dir / "mnist", 2).error().code == warm::errc::not_found);
  CHECK(warm::find_model_file(dir / "nothing").error().code == warm::errc::not_found);
  fs::create_directories(dir / "empty");
  CHECK_THAT(warm::find_model_file(dir / "empty").error().message, Catch::Contains("neither model.safetensors"));
}

TEST_CASE("repository roots must exist") {
  warm::test::temp_dir dir;
  CHECK(warm::model_repository::create({dir.path()}));
  auto missing = warm::model_repository::create({dir / "absent"});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == warm::errc::invalid_argument);
}

TEST_CASE("resolve searches the roots in order and confines paths to them") {
  warm::test::temp_dir outside;
  warm::test::temp_dir a, b;
  make_model(a / "one/1/model.safetensors");
  make_model(b / "two/4/model.safetensors");
  make_model(outside / "secret/1/model.safetensors");
  fs::create_symlink(outside / "secret", a / "escape");           // a model dir escaping the root
  fs::create_directories(a / "sneaky");
  fs::create_symlink(outside / "secret/1", a / "sneaky/1");       // a version dir escaping it
  fs::create_symlink(a / "one", a / "alias");                     // a symlink staying inside is fine

  auto repo = warm::model_repository::create({a.path(), b.path()});
  REQUIRE(repo);
  CHECK(repo->resolve("one").value() == fs::canonical(a / "one/1/model.safetensors").string());
  CHECK(repo->resolve("two", 4).value() == fs::canonical(b / "two/4/model.safetensors").string());
  CHECK(repo->resolve("alias").value() == fs::canonical(a / "one/1/model.safetensors").string());
  CHECK(repo->resolve("one/../one").has_value());

  struct bad_case {
    std::string path;
    warm::errc code;
    const char* error;
  };
  for (const auto& c : std::vector<bad_case>{
           {"", warm::errc::invalid_argument, "empty model path"},
           {outside / "secret", warm::errc::invalid_argument, "must be relative"},
           {"../" + fs::path(outside.path()).filename().string() + "/secret", warm::errc::invalid_argument, "outside the repository root"},
           {"escape", warm::errc::invalid_argument, "outside the repository root"},
           {"sneaky", warm::errc::invalid_argument, "outside the repository root"},
           {"missing", warm::errc::not_found, "not found in any repository root"},
       }) {
    INFO(c.path);
    auto r = repo->resolve(c.path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == c.code);
    CHECK_THAT(r.error().message, Catch::Contains(c.error));
  }
}
