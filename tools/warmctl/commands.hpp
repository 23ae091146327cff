// warmctl's commands that talk to warmd, and the pieces they share. Each add_* function adds
// its subcommands to a CLI11 app; a subcommand's callback runs the RPC and sets the context's
// exit status: exit_ok, exit_server_error (the server's status on stderr) or exit_usage (bad
// input, no connection).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "connection.hpp"
#include "offline_commands.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::ctl {

// The global options: --connect, --token-file, --json.
struct cli_options {
  connect_options connect;
  bool json = false;
};

// What a command needs; borrowed by the app's callbacks, so it must outlive the app.
struct command_context {
  session& s;
  cli_options options;
  int exit_code = exit_usage;
};

// Runs `body` on the session's connection and stores its exit status in ctx.exit_code. A
// connection_error prints "warmctl: MESSAGE" on stderr, drops the connection and gives
// exit_usage.
void run_rpc(command_context& ctx, const std::function<int(connection&)>& body);

// Prints "warmctl: CODE: MESSAGE" on stderr for a status that is not ok and returns
// exit_server_error; returns exit_ok for ok.
int check_status(warm::rpc::Status::Reader status);

// Prints a usage error on stderr and returns exit_usage.
int usage_error(const std::string& message);

// A model's status, found the way an inference finds its model: `id` names a model, or a vmodel
// (a served model's name and its labels are vmodels: docs/versions.md) whose active model it is.
struct resolved_status {
  model_status model;  // the model's, never in state not_found
  std::string vmodel;  // `id` when it named a vmodel; empty for a model
};
// An unknown id, or a vmodel without an active model, is not_found; a server error is returned as
// the server worded it. Throws connection_error like every call.
expected<resolved_status> resolve_status(command_context& ctx, connection& c,
                                         const std::string& id);

// register, unregister, status, ensure, models, vmodel {set,delete,status}
void add_model_commands(CLI::App& app, command_context& ctx);
// infer
void add_infer_command(CLI::App& app, command_context& ctx);
// inspect, watch
void add_inspect_commands(CLI::App& app, command_context& ctx);
// versions, reload
void add_version_commands(CLI::App& app, command_context& ctx);

// A new app with the global options, the offline commands and the RPC commands, all bound to
// `ctx`. `main` parses argv with it; the REPL builds one per line.
std::unique_ptr<CLI::App> make_app(command_context& ctx);

}  // namespace warm::ctl
