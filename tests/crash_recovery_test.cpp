// Durability: a process registering models and vmodels is killed with SIGKILL at random moments;
// a runtime started on the same state directory must hold every registration and vmodel change
// that was acknowledged. Its own executable: fork() happens before this process has any thread.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "support/test_files.hpp"
#include "warm/model_repository.hpp"
#include "warm/model_writer.hpp"
#include "warm/runtime.hpp"

using namespace warm;

namespace {

runtime_options options_for(const test::temp_dir& dir) {
  runtime_options o;
  o.repositories = {dir / "repo"};
  o.state_dir = dir / "state";
  o.devices = {"host:1MiB"};
  return o;
}

// The child: registers r<first>, r<first+1>, ... and points vmodel v<i % 7> at every 5th one,
// writing one line per acknowledgement to `out`. Never returns.
[[noreturn]] void child(const test::temp_dir& dir, int first, int out) {
  auto rt = runtime::create(options_for(dir));
  if (!rt) _exit(3);
  for (int i = first;; ++i) {
    auto id = "r" + std::to_string(i);
    if (!(*rt)->register_model(id, {i % 2 ? "a" : "b"}).get()) _exit(4);
    auto line = "M " + id + "\n";
    if (write(out, line.data(), line.size()) < 0) _exit(5);
    if (i % 5 == 0) {
      auto vid = "v" + std::to_string(i % 7);
      if (!(*rt)->set_vmodel(vid, id).get()) _exit(6);
      line = "V " + vid + " " + id + "\n";
      if (write(out, line.data(), line.size()) < 0) _exit(5);
    }
  }
}

}  // namespace

TEST_CASE("every acknowledged registration and vmodel change survives kill -9") {
  test::temp_dir dir;
  REQUIRE(write_dense_model(dir / "repo/a/1/model.safetensors", {{8, 4}, activation::relu, 1}));
  REQUIRE(write_dense_model(dir / "repo/b/1/model.safetensors", {{8, 4}, activation::relu, 2}));

  std::set<std::string> models;
  std::map<std::string, std::string> vmodels;  // last acknowledged target
  std::mt19937 rng(42);
  int next = 0;
  for (int round = 0; round < 6; ++round) {
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(pipe_fds[0]);
      child(dir, next, pipe_fds[1]);
    }
    close(pipe_fds[1]);
    // Let it acknowledge a random number of changes, then kill it mid-flight.
    int wanted = std::uniform_int_distribution<int>(3, 40)(rng);
    FILE* in = fdopen(pipe_fds[0], "r");
    char buffer[256];
    int seen = 0;
    auto record = [&](const char* text) {
      std::istringstream line(text);
      std::string kind, id, target;
      line >> kind >> id >> target;
      if (kind == "M") {
        models.insert(id);
        next = std::max(next, std::stoi(id.substr(1)) + 1);
      } else if (kind == "V") {
        vmodels[id] = target;
      }
    };
    while (seen < wanted && std::fgets(buffer, sizeof buffer, in)) {
      record(buffer);
      ++seen;
    }
    kill(pid, SIGKILL);
    while (std::fgets(buffer, sizeof buffer, in))
      record(buffer);  // acknowledged before the kill
    std::fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    ++next;  // the killed child may have registered one more without telling: skip its id
  }
  REQUIRE(models.size() >= 6 * 3);

  auto rt = runtime::create(options_for(dir));
  REQUIRE(rt);
  auto listed = (*rt)->list_models().get();
  REQUIRE(listed);
  std::set<std::string> present;
  for (auto& m : *listed)
    present.insert(m.id);
  for (auto& id : models)
    CHECK(present.count(id) == 1);
  for (auto& [vid, target] : vmodels) {
    auto v = (*rt)->vmodel_status(vid).get();
    REQUIRE(v);
    // The last acknowledged change is there; a later unacknowledged one may be too.
    CHECK(std::stoi(v->target.substr(1)) >= std::stoi(target.substr(1)));
    CHECK(present.count(v->target) == 1);
  }
  // The restarted registry works: the next registration and an inference succeed.
  CHECK((*rt)->register_model("after", {"a"}).get());
  CHECK((*rt)->ensure_loaded("after", true).get());
}
