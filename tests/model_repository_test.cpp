// Repository layout <root>/<model>/<version>/model.safetensors and path confinement.
#include <catch2/catch.hpp>

#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/confined_open.hpp"
#include "support/test_files.hpp"
#include "warm/dense_model.hpp"
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
  fs::create_directories(dir / "mnist/7");             // no model file: not a version
  make_model(dir / "mnist/007/model.safetensors");     // leading zero: not a version
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
  CHECK_THAT(warm::find_model_file(dir / "empty").error().message,
             Catch::Contains("neither a model file (model.safetensors, model.pt)"));
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
  fs::create_symlink(outside / "secret", a / "escape");  // a model dir escaping the root
  fs::create_directories(a / "sneaky");
  fs::create_symlink(outside / "secret/1", a / "sneaky/1");  // a version dir escaping it
  fs::create_symlink(a / "one", a / "alias");                // a symlink staying inside is fine

  auto repo = warm::model_repository::create({a.path(), b.path()});
  REQUIRE(repo);
  CHECK(repo->resolve("one").value().path == fs::canonical(a / "one/1/model.safetensors").string());
  CHECK(repo->resolve("two", 4).value().path ==
        fs::canonical(b / "two/4/model.safetensors").string());
  CHECK(repo->resolve("alias").value().path ==
        fs::canonical(a / "one/1/model.safetensors").string());
  CHECK(repo->resolve("one/../one").has_value());
  // The version directory chosen (the highest, or the one asked for); none for a file named
  // directly.
  CHECK(repo->resolve("one").value().version == std::optional<std::uint64_t>(1));
  CHECK(repo->resolve("two", 4).value().version == std::optional<std::uint64_t>(4));
  CHECK(repo->resolve("alias").value().version == std::optional<std::uint64_t>(1));
  CHECK_FALSE(repo->resolve("one/1/model.safetensors").value().version);
  CHECK_FALSE(repo->resolve("one/1").value().version);

  struct bad_case {
    std::string path;
    warm::errc code;
    const char* error;
  };
  for (const auto& c : std::vector<bad_case>{
           {"", warm::errc::invalid_argument, "empty model path"},
           {outside / "secret", warm::errc::invalid_argument, "must be relative"},
           {"../" + fs::path(outside.path()).filename().string() + "/secret",
            warm::errc::invalid_argument, "outside the repository root"},
           {"escape", warm::errc::invalid_argument, "outside the repository root"},
           {"sneaky", warm::errc::invalid_argument, "outside the repository root"},
           {"missing", warm::errc::not_found, "not found in any repository root"},
           {std::string("one\0/../escape", 14), warm::errc::invalid_argument, "NUL"},
       }) {
    INFO(c.path);
    auto r = repo->resolve(c.path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == c.code);
    CHECK_THAT(r.error().message, Catch::Contains(c.error));
  }
}

TEST_CASE("a location's root is opened by its path at each open: moved away, then back") {
  warm::test::temp_dir dir;
  make_model(dir / "repo/m/1/model.safetensors");
  auto repo = warm::model_repository::create({dir / "repo"});
  REQUIRE(repo);
  auto where = repo->resolve("m").value();
  CHECK(where.root == fs::canonical(dir / "repo").string());
  fs::rename(dir / "repo", dir / "away");
  auto gone = warm::open_model_file(where);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == warm::errc::not_found);
  fs::create_directory_symlink(dir / "away", dir / "repo");  // the root itself a symlink now
  CHECK_FALSE(warm::open_model_file(where));
  fs::remove(dir / "repo");
  fs::rename(dir / "away", dir / "repo");
  CHECK(warm::open_model_file(where));
}

// The repository escape at load time: a location resolved at registration is opened again at
// every load, beneath its root's directory handle, so swapping a directory or the file for a
// symlink afterwards leads nowhere outside. Each walk is checked on its own.
TEST_CASE("a location is confined again when it is opened, whatever changed on disk since") {
  for (auto walk : {warm::beneath_walk::openat2, warm::beneath_walk::components}) {
    INFO((walk == warm::beneath_walk::openat2 ? "openat2" : "component walk"));
    warm::test::temp_dir outside, root;
    make_model(root / "m/1/model.safetensors");
    make_model(outside /
               "other/1/model.safetensors");  // a valid model: only confinement refuses it
    // Looks like a safetensors length prefix whose value is the file's first eight bytes.
    warm::test::write_file(outside / "secret", "root:*:20000:0:99999:7:::\n");
    auto repo = warm::model_repository::create({root.path()});
    REQUIRE(repo);
    auto where = repo->resolve("m").value();
    auto relative = std::string("m/1/model.safetensors");
    auto root_fd = ::open(root.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    REQUIRE(root_fd >= 0);
    CHECK(warm::open_beneath(root_fd, relative, where.path, walk));

    // The version directory becomes a symlink to a directory outside.
    fs::rename(root / "m/1", root / "m/1.old");
    fs::create_directory_symlink(outside / "other/1", root / "m/1");
    auto swapped_dir = warm::open_beneath(root_fd, relative, where.path, walk);
    REQUIRE_FALSE(swapped_dir);
    CHECK(swapped_dir.error().code == warm::errc::invalid_argument);
    CHECK_THAT(swapped_dir.error().message, Catch::Contains("outside the repository root"));
    auto through_location = warm::open_model_file(where);  // what every load and describe calls
    REQUIRE_FALSE(through_location);
    CHECK_THAT(through_location.error().message, Catch::Contains("outside the repository root"));

    // The model file becomes a symlink to a file outside: refused, and none of its bytes shown.
    fs::remove(root / "m/1");
    fs::rename(root / "m/1.old", root / "m/1");
    fs::remove(root / "m/1/model.safetensors");
    fs::create_symlink(outside / "secret", root / "m/1/model.safetensors");
    auto swapped_file = warm::open_model_file(where);
    REQUIRE_FALSE(swapped_file);
    CHECK(swapped_file.error().code == warm::errc::invalid_argument);
    CHECK_THAT(swapped_file.error().message, Catch::Contains("outside the repository root"));
    CHECK(warm::open_beneath(root_fd, relative, where.path, walk).error().code ==
          warm::errc::invalid_argument);

    // A FIFO or a directory where the file was: refused on the O_PATH handle, never opened for
    // reading (a FIFO would otherwise block a loader until a writer came).
    fs::remove(root / "m/1/model.safetensors");
    REQUIRE(::mkfifo((root / "m/1/model.safetensors").c_str(), 0600) == 0);
    auto fifo = warm::open_beneath(root_fd, relative, where.path, walk);
    REQUIRE_FALSE(fifo);
    CHECK_THAT(fifo.error().message, Catch::Contains("not a regular file"));
    fs::remove(root / "m/1/model.safetensors");
    fs::create_directory(root / "m/1/model.safetensors");
    CHECK_THAT(warm::open_beneath(root_fd, relative, where.path, walk).error().message,
               Catch::Contains("not a regular file"));
    fs::remove(root / "m/1/model.safetensors");
    CHECK(warm::open_beneath(root_fd, relative, where.path, walk).error().code ==
          warm::errc::not_found);

    // Paths that are not plainly below the root are refused before any walk.
    for (const char* bad : {"", "/etc/passwd", "../x", "m/../../x", "m//1"}) {
      INFO(bad);
      auto r = warm::open_beneath(root_fd, bad, bad, walk);
      REQUIRE_FALSE(r);
      CHECK(r.error().code != warm::errc::internal);
    }
    ::close(root_fd);
  }
}

TEST_CASE("symlinks inside the root: openat2 follows them, the component walk refuses them") {
  warm::test::temp_dir root;
  make_model(root / "m/1/model.safetensors");
  fs::create_directory_symlink("m", root / "alias");  // relative, stays inside
  auto root_fd = ::open(root.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(root_fd >= 0);
  CHECK(warm::open_beneath(root_fd, "alias/1/model.safetensors", "alias",
                           warm::beneath_walk::openat2));
  auto walked = warm::open_beneath(root_fd, "alias/1/model.safetensors", "alias",
                                   warm::beneath_walk::components);
  REQUIRE_FALSE(walked);
  CHECK_THAT(walked.error().message, Catch::Contains("outside the repository root"));
  fs::create_directory_symlink(root.path() + "/m", root / "absolute");  // absolute: refused by both
  CHECK_FALSE(warm::open_beneath(root_fd, "absolute/1/model.safetensors", "absolute",
                                 warm::beneath_walk::openat2));
  ::close(root_fd);
}

// A path with '..' that leads out of the root is refused by each walk even when what it names
// EXISTS outside (a real, readable file): the component walk refuses any '..' component itself,
// openat2 refuses a step above the root (RESOLVE_BENEATH); neither relies on the target missing.
TEST_CASE("'..' out of the root is refused by every walk though the file it leads to exists") {
  warm::test::temp_dir dir;
  make_model(dir / "root/m/1/model.safetensors");
  warm::test::write_file(dir / "secret", "root:*:20000:0:99999:7:::\n");
  const std::string root = dir / "root";
  auto root_fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(root_fd >= 0);
  const std::pair<warm::beneath_walk, const char*> walks[] = {
      {warm::beneath_walk::openat2, "openat2"},
      {warm::beneath_walk::components, "component walk"},
      {warm::beneath_walk::automatic, "automatic"}};
  for (const char* escape : {"../secret", "m/../../secret", "m/1/../../../secret",
                             "m/1/../../../root/m/1/model.safetensors"}) {  // out, then back in
    INFO(escape);
    REQUIRE(fs::is_regular_file(root + "/" + escape));  // the path does name a real file
    for (const auto& [walk, walk_name] : walks) {
      INFO(walk_name);
      auto r = warm::open_beneath(root_fd, escape, escape, walk);
      CHECK_FALSE(r);
      if (!r) {
        CHECK(r.error().code == warm::errc::invalid_argument);
        CHECK_THAT(r.error().message, Catch::Contains("outside the repository root"));
      }
    }
  }
  for (const auto& [walk, walk_name] : walks) {  // the plain path beside them opens
    INFO(walk_name);
    CHECK(warm::open_beneath(root_fd, "m/1/model.safetensors", "m", walk));
  }
  ::close(root_fd);
}
