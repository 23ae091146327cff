// warmctl's offline subcommands: they work on files and need no daemon.
//   make-model --out DIR --layers 784,512,10 [--seed N] [--activation relu]
//   model-info PATH [--json]
#pragma once

#include <CLI/CLI.hpp>

namespace warm::ctl {

// Exit statuses shared by every warmctl command.
inline constexpr int exit_ok = 0;
inline constexpr int exit_server_error = 1;  // the daemon reported an error
inline constexpr int exit_usage = 2;         // bad usage, invalid input or no connection

// Adds the subcommands to `app`; each sets `exit_code` when it runs. `json` is the global flag.
void add_offline_commands(CLI::App& app, bool& json, int& exit_code);

}  // namespace warm::ctl
