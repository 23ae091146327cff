#include "repl.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <editline/readline.h>
#include <unistd.h>

#include "rpc/convert.hpp"

namespace warm::ctl {
namespace {

const std::vector<std::string> command_names = {
    "register", "unregister", "retry",    "status", "ensure",     "vmodel",     "models", "infer",
    "inspect",  "watch",      "versions", "reload", "model-info", "make-model", "help",   "quit"};
const std::vector<std::string> vmodel_commands = {"set", "delete", "status"};
const std::vector<std::string> inspect_sections = {"devices", "queue", "cache",  "failures",
                                                   "models",  "tier",  "cluster"};

// The state tab completion reads: readline's callbacks are plain C functions.
struct completion_state {
  session* s = nullptr;
  const cli_options* options = nullptr;
  std::vector<std::string> candidates;
  std::size_t next = 0;
  std::string prefix;
};
completion_state completion;

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

// Registered model ids, or none when the daemon is unreachable (completion never fails loudly).
std::vector<std::string> model_ids() {
  std::vector<std::string> ids;
  try {
    auto& c = completion.s->connect(completion.options->connect);
    std::string after;
    for (int page = 0; page < 100; ++page) {
      auto req = c.warm().listModelsRequest();
      req.setAfter(after);
      auto reply = completion.s->wait(req.send());
      if (reply.getStatus().getCode() != warm::rpc::Status::Code::OK) break;
      for (auto m : reply.getModels())
        ids.push_back(warm::rpc::to_std(m.getId()));
      std::string next = warm::rpc::to_std(reply.getNext());
      if (next.empty() || next == after) break;
      after = next;
    }
  } catch (const connection_error&) {
    completion.s->drop();
  }
  return ids;
}

char* next_candidate(const char* text, int state) {
  if (state == 0) {
    completion.next = 0;
    completion.prefix = text;
  }
  while (completion.next < completion.candidates.size()) {
    const auto& c = completion.candidates[completion.next++];
    if (c.compare(0, completion.prefix.size(), completion.prefix) == 0) return ::strdup(c.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int start, int /*end*/) {
  rl_attempted_completion_over = 1;  // never fall back to file names
  auto words = split_words(std::string(rl_line_buffer, static_cast<std::size_t>(start)));
  // Skip global options so "--json status <TAB>" completes like "status <TAB>".
  std::vector<std::string> args;
  for (const auto& w : words)
    if (w.rfind("--", 0) != 0) args.push_back(w);
  if (args.empty())
    completion.candidates = command_names;
  else if (args[0] == "vmodel" && args.size() == 1)
    completion.candidates = vmodel_commands;
  else if (args[0] == "inspect" && args.size() == 1)
    completion.candidates = inspect_sections;
  else if (args[0] == "model-info" || args[0] == "make-model" ||
           (args[0] == "register" && args.size() >= 2)) {
    rl_attempted_completion_over =
        0;  // file names (register's PATH is server-side, but close enough)
    return nullptr;
  } else
    completion.candidates = model_ids();
  return rl_completion_matches(text, next_candidate);
}

std::string history_path() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.warmctl_history" : std::string();
}

void print_help(command_context& ctx) {
  auto app = make_app(ctx);
  std::cout << app->help()
            << "\nAt this prompt: COMMAND [ARGS] (as one-shot), `COMMAND --help`, `help`, `quit`.\n"
            << "A line of global options alone (e.g. `--json`) applies to the lines after it.\n";
}

// Runs one line; returns its exit status (or -1 for quit).
int run_line(session& s, cli_options& options, const std::string& line) {
  auto words = split_words(line);
  if (words.empty()) return 0;
  if (words[0] == "quit" || words[0] == "exit") return -1;
  command_context ctx{s, options};
  if (words[0] == "help" || words[0] == "?") {
    print_help(ctx);
    return 0;
  }
  auto app = make_app(ctx);
  try {
    app->parse(line, false);
  } catch (const CLI::ParseError& e) {
    int rc = app->exit(e);
    return rc == 0 ? 0 : exit_usage;
  }
  if (app->get_subcommands().empty()) {
    options = ctx.options;  // global options only: keep them
    return 0;
  }
  return ctx.exit_code;
}

}  // namespace

int run_repl(session& s, cli_options options) {
  int last = 0;
  if (!::isatty(STDIN_FILENO)) {
    for (std::string line; std::getline(std::cin, line);) {
      int rc = run_line(s, options, line);
      if (rc < 0) break;
      last = rc;
      std::cout.flush();
    }
    return last;
  }
  completion.s = &s;
  completion.options = &options;
  rl_readline_name = const_cast<char*>("warmctl");
  rl_attempted_completion_function = complete;
  std::string history = history_path();
  using_history();
  stifle_history(1000);
  if (!history.empty()) read_history(history.c_str());
  std::cout << "warmctl: daemon at " << options.connect.address
            << " (connects on first use); `help` lists commands\n";
  for (;;) {
    char* raw = readline("warm> ");
    if (!raw) {
      std::cout << "\n";
      break;
    }
    std::string line(raw);
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    add_history(line.c_str());
    if (!history.empty()) write_history(history.c_str());
    int rc = run_line(s, options, line);
    if (rc < 0) break;
    last = rc;
  }
  return last;
}

}  // namespace warm::ctl
