// warmctl's interactive mode: reads command lines and runs each through the same command tree as
// one-shot mode (make_app), on one session whose connection is reused between lines.
//
// On a terminal it uses libedit: history in ~/.warmctl_history, tab completion of command names,
// vmodel/inspect subcommands and model ids (fetched with listModels when completing). When stdin
// is not a terminal it reads plain lines with no prompt and no history, so scripts can pipe
// commands in. `help` lists the commands, `quit`/`exit` or end of input leaves. A line with only
// global options (`--json`, `--connect A`, `--token-file F`) changes them for later lines.
#pragma once

#include "commands.hpp"

namespace warm::ctl {

// Runs until quit or end of input; returns the exit status of the last command (0 if none ran).
int run_repl(session& s, cli_options options);

}  // namespace warm::ctl
