#include "backends/code_helper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "storage/located_file.hpp"

extern char** environ;

namespace warm {
namespace {

using json = nlohmann::json;

constexpr std::size_t max_answer_bytes = 1 << 20;  // a description is a few kB
constexpr std::size_t max_tensors = 1024;
constexpr std::size_t max_rank = 32;
constexpr std::size_t max_name = 1024;

json spec_json(const tensor_spec& t) {
  return {{"name", t.name},
          {"datatype", std::string(v2_name(t.type))},
          {"shape", t.shape},
          {"known", t.known}};
}

// A descriptor that closes itself.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string description_to_json(const model_description& d) {
  json io{{"inputs", json::array()}, {"outputs", json::array()}, {"batched", d.io.batched}};
  for (const auto& t : d.io.inputs)
    io["inputs"].push_back(spec_json(t));
  for (const auto& t : d.io.outputs)
    io["outputs"].push_back(spec_json(t));
  return json{{"kind", d.kind},
              {"predicted_bytes", d.predicted_bytes},
              {"layers", d.layers},
              {"activation", d.activation},
              {"io", std::move(io)}}
      .dump();
}

std::string error_to_json(const error& e) {
  return json{{"error", {{"code", std::string(to_string(e.code))}, {"message", e.message}}}}.dump();
}

expected<model_description> description_from_json(std::string_view text, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, path + ": the describe helper's answer " + why);
  };
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) return bad("is not a JSON object");
  if (auto e = doc.find("error"); e != doc.end()) {
    if (!e->is_object() || !e->contains("message") || !(*e)["message"].is_string() ||
        !e->contains("code") || !(*e)["code"].is_string())
      return bad("is a malformed error");
    auto message = (*e)["message"].get<std::string>();
    if (message.size() > 4096) message.resize(4096);
    const auto code = (*e)["code"].get<std::string>();
    // The helper may only refuse the model: whatever code it claims, the caller sees the model
    // as invalid, except for a helper that says it ran out of something.
    const errc c = code == "model_too_large" ? errc::model_too_large : errc::invalid_argument;
    return make_error(c, message);
  }
  model_description d;
  try {
    auto read_side = [&](const json& list, std::vector<tensor_spec>& out) -> expected<void> {
      if (!list.is_array() || list.size() > max_tensors)
        return bad("lists too many tensors or none");
      for (const auto& t : list) {
        tensor_spec s;
        s.name = t.at("name").get<std::string>();
        if (s.name.empty() || s.name.size() > max_name) return bad("names a tensor badly");
        auto type = parse_v2_dtype(t.at("datatype").get<std::string>());
        if (!type) return bad("gives tensor '" + s.name + "' an unknown datatype");
        s.type = *type;
        const auto& shape = t.at("shape");
        if (!shape.is_array() || shape.size() > max_rank)
          return bad("gives tensor '" + s.name + "' a bad shape");
        for (const auto& dim : shape) {
          auto v = dim.get<std::int64_t>();
          if (v < -1) return bad("gives tensor '" + s.name + "' a negative dimension");
          s.shape.push_back(v);
        }
        s.known = t.at("known").get<bool>();
        out.push_back(std::move(s));
      }
      return {};
    };
    d.kind = doc.at("kind").get<std::string>();
    d.predicted_bytes = doc.at("predicted_bytes").get<std::uint64_t>();
    d.layers = doc.at("layers").get<std::uint32_t>();
    d.activation = doc.at("activation").get<std::string>();
    const auto& io = doc.at("io");
    if (auto r = read_side(io.at("inputs"), d.io.inputs); !r) return std::move(r).error();
    if (auto r = read_side(io.at("outputs"), d.io.outputs); !r) return std::move(r).error();
    d.io.batched = io.at("batched").get<bool>();
  } catch (const json::exception& e) {
    return bad(std::string("is malformed: ") + e.what());
  }
  return d;
}

expected<model_description> describe_in_helper(const model_location& where,
                                               const code_policy& policy) {
  auto refuse = [&](const std::string& why) {
    return make_error(errc::invalid_argument, where.path + ": " + why);
  };
  if (policy.describe_helper.empty())
    return refuse(
        "a " + where.kind +
        " model is code: it is described by a sandboxed helper (warm-runtime), and none is set "
        "(or allow in-process code, which runs the model's code in this process)");
  auto file = open_located(where);
  if (!file) return std::move(file).error();

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return make_error(errc::unavailable, std::string("pipe: ") + std::strerror(errno));
  fd_guard read_end{pipe_fds[0]}, write_end{pipe_fds[1]};

  const std::vector<std::string> args{policy.describe_helper,
                                      "--describe",
                                      "--kind",
                                      where.kind,
                                      "--path",
                                      where.path,
                                      "--memory",
                                      std::to_string(policy.describe_memory),
                                      "--cpu-seconds",
                                      std::to_string(policy.describe_cpu_seconds)};
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.fd, 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, file->descriptor(), 3);  // dup2 clears FD_CLOEXEC
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attributes, &all);
  // The helper's environment: warmd's, with OpenBLAS's thread pool off at load (the helper must
  // be single-threaded to confine itself).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0) env_strings.emplace_back(*e);
  env_strings.emplace_back("OPENBLAS_NUM_THREADS=1");
  std::vector<char*> envp;
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, policy.describe_helper.c_str(), &actions, &attributes,
                                  argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0)
    return make_error(errc::unavailable, "cannot start the describe helper " +
                                             policy.describe_helper + ": " +
                                             std::strerror(spawned));
  ::close(write_end.fd);
  write_end.fd = -1;

  // Read the answer until the helper closes its end, within the deadline.
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + policy.describe_deadline;
  bool timed_out = false, too_long = false;
  char buffer[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{read_end.fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const auto n = ::read(read_end.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (answer.size() + static_cast<std::size_t>(n) > max_answer_bytes) {
      too_long = true;
      break;
    }
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  if (timed_out || too_long) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return refuse("was not described within " +
                  std::to_string(policy.describe_deadline.count() / 1000.0).substr(0, 4) +
                  " s (its code may not end); the describe was stopped");
  if (too_long) return refuse("the describe helper answered more than 1 MiB");
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::string why =
        sig == SIGXCPU ? "ran out of CPU time" : std::string("died of ") + strsignal(sig);
    return refuse("describing the model crashed its helper (" + why +
                  "): its code is not safe to load");
  }
  if (answer.empty())
    return refuse("the describe helper exited with status " + std::to_string(WEXITSTATUS(status)) +
                  " and no answer");
  return description_from_json(answer, where.path);
}

}  // namespace warm
