// warmctl: warm's command-line client. Offline subcommands (model files) for now; the daemon
// commands and the REPL arrive with the service.
#include <CLI/CLI.hpp>

#include "offline_commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"warmctl: inspect and drive the warm model cache"};
  app.require_subcommand(1);
  bool json = false;
  int exit_code = warm::ctl::exit_usage;
  app.add_flag("--json", json, "Print one JSON document per command");
  warm::ctl::add_offline_commands(app, json, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : warm::ctl::exit_usage;
  }
  return exit_code;
}
