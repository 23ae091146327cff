// warm-eval: the evaluation tooling (traces, catalogs, the policy simulator, replay
// against a live warmd). Each subcommand registers itself from its own file; see commands.hpp.
// Exit status: 0 ok, 1 failure, 2 usage.
#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace warm::eval_cli;
  CLI::App app{"warm-eval: request traces, model catalogs and cache-policy evaluation"};
  app.require_subcommand(1);
  int rc = exit_usage;

  add_trace_command(app, rc);
  add_catalog_command(app, rc);
  add_simulate_command(app, rc);
  add_sweep_command(app, rc);
  add_models_command(app, rc);
  add_replay_command(app, rc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }
  return rc;
}
