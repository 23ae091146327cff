// warmctl: warm's command-line client. One-shot: `warmctl [--connect A] [--json] COMMAND ...`;
// with no command, an interactive REPL (repl.hpp). Commands: offline_commands.hpp (model files)
// and commands.hpp (the daemon). Exit status 0 ok, 1 server-reported error, 2 usage/connection.
#include <iostream>

#include "commands.hpp"
#include "repl.hpp"

int main(int argc, char** argv) {
  try {
    warm::ctl::session s;
    warm::ctl::command_context ctx{s, {}};
    auto app = warm::ctl::make_app(ctx);
    try {
      app->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      int rc = app->exit(e);
      return rc == 0 ? 0 : warm::ctl::exit_usage;
    }
    if (app->get_subcommands().empty()) return warm::ctl::run_repl(s, ctx.options);
    return ctx.exit_code;
  } catch (const kj::Exception& e) {
    std::cerr << "warmctl: " << e.getDescription().cStr() << "\n";
    return warm::ctl::exit_usage;
  }
}
