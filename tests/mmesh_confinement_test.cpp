// The confinement warm-mmesh --exec puts on its runtime (tools/warm-mmesh/confinement.hpp): the
// Landlock rules built from the repositories, the command, the program's "# warm-mmesh-read:"
// declaration and the extra paths; WARM_MMESH_CONFINE's values. Nothing is applied here: the
// service test tests/mmesh_sandbox_test.py runs a hostile model in the confined runtime.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "confinement.hpp"

using namespace warm::mmesh;
namespace fs = std::filesystem;

namespace {

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A temporary directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "mmesh-confinement.XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = fs::canonical(pattern);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, const std::string& text, bool executable) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), executable ? 0755 : 0644);
}

}  // namespace

TEST_CASE("a colon-separated list drops empty entries", "[mmesh][confinement]") {
  CHECK(split_paths("") == std::vector<std::string>{});
  CHECK(split_paths("/a::/b:") == std::vector<std::string>{"/a", "/b"});
}

TEST_CASE("WARM_MMESH_CONFINE takes on and off words, nothing else", "[mmesh][confinement]") {
  for (const char* off : {"0", "false", "no", "off"}) {
    auto v = parse_confine_env(off);
    REQUIRE(v);
    CHECK_FALSE(*v);
  }
  for (const char* on : {"", "1", "true", "yes", "on"}) {
    auto v = parse_confine_env(on);
    REQUIRE(v);
    CHECK(*v);
  }
  auto bad = parse_confine_env("maybe");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("WARM_MMESH_CONFINE") != std::string::npos);
}

TEST_CASE(
    "the rules: system read-exec, repositories read-only, the private directory the only "
    "writable place",
    "[mmesh][confinement]") {
  runtime_paths p;
  p.repositories = {"/srv/repo-a", "/srv/repo-b"};
  p.extra_read = {"/opt/pkg"};
  p.program = "/opt/bin/runtime";
  p.private_dir = "/tmp/warm-mmesh.abc";
  const warm::sandbox::fs_rules r = runtime_rules(p);
  CHECK(r.write == std::vector<std::string>{"/tmp/warm-mmesh.abc"});  // repositories never
  for (const std::string& sys : warm::sandbox::system_read_exec_paths())
    CHECK(has(r.read_exec, sys));
  CHECK(has(r.read_exec, "/opt/bin/runtime"));  // /bin/sh execs it
  CHECK(has(r.read, "/opt/bin"));               // modules beside a script
  CHECK_FALSE(has(r.read_exec, "/opt/bin"));    // its neighbours are not programs it may run
  CHECK(has(r.read, "/srv/repo-a"));
  CHECK(has(r.read, "/srv/repo-b"));
  CHECK(has(r.read, "/opt/pkg"));
  CHECK(has(r.read, "/proc/self/statm"));
  for (const auto* list : {&r.read, &r.read_exec, &r.write}) {
    for (const char* never : {"/", "/etc", "/tmp", "/home", "/root", "/proc", "/proc/self", "/sys"})
      CHECK_FALSE(has(*list, never));
  }

  runtime_paths bare;  // a program not found: no rule for it
  bare.private_dir = "/tmp/d";
  const auto b = runtime_rules(bare);
  CHECK(b.read_exec == warm::sandbox::system_read_exec_paths());
}

TEST_CASE("the command's program: its first word, found on PATH, resolved",
          "[mmesh][confinement]") {
  temp_dir t;
  write_file(t.path / "rt", "#!/bin/sh\n", true);
  write_file(t.path / "data", "", false);
  fs::create_symlink(t.path / "rt", t.path / "link");
  const std::string dir = t.path.string();
  CHECK(command_program(dir + "/rt --capacity 1GiB", "") == dir + "/rt");
  CHECK(command_program("  '" + dir + "/rt' a", "") == dir + "/rt");
  CHECK(command_program("rt --x", "/nonexistent:" + dir) == dir + "/rt");
  CHECK(command_program(dir + "/link", "") == dir + "/rt");  // symlinks resolved
  CHECK(command_program(dir + "/data", "").empty());         // not executable
  CHECK(command_program("FOO=1 " + dir + "/rt", "").empty());
  CHECK(command_program("nosuchprogram", dir).empty());
  CHECK(command_program("", dir).empty());
}

TEST_CASE("paths the command line names are read-only", "[mmesh][confinement]") {
  temp_dir t;
  write_file(t.path / "script.py", "", false);
  fs::create_directory(t.path / "schemas");
  const std::string dir = t.path.string();
  const auto paths = command_paths("/usr/bin/python3 " + dir + "/script.py --schemas " + dir +
                                   "/schemas --out=" + dir + "/schemas --capacity 1GiB " + dir +
                                   "/missing plainword");
  CHECK(paths == std::vector<std::string>{dir + "/script.py", dir + "/schemas", dir + "/schemas"});
}

TEST_CASE("a script declares what it reads in a # warm-mmesh-read: line", "[mmesh][confinement]") {
  temp_dir t;
  write_file(t.path / "launcher",
             "#!/usr/bin/python3\n# warm-mmesh-read: /opt/pkg:lib/schemas\n"
             "# warm-mmesh-read: /opt/more  \nimport sys\n",
             true);
  write_file(t.path / "binary",
             std::string("\x7f"
                         "ELF# warm-mmesh-read: /etc\n"),
             true);
  write_file(t.path / "plain", "#!/bin/sh\necho\n", true);
  CHECK(declared_read_paths((t.path / "launcher").string()) ==
        std::vector<std::string>{"/opt/pkg", (t.path / "lib/schemas").string(), "/opt/more"});
  CHECK(declared_read_paths((t.path / "binary").string()).empty());  // not a script
  CHECK(declared_read_paths((t.path / "plain").string()).empty());
  CHECK(declared_read_paths((t.path / "missing").string()).empty());
  CHECK(declared_read_paths("").empty());
}
