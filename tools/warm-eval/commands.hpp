// warm-eval's subcommands (docs/eval/traces.md and docs/eval/catalog.md). Each lives in
// its own file and registers itself on the app with an add_*_command function declared here;
// main.cpp only calls them. A command's callback runs after parsing and sets `rc`.
//   trace    — trace_command.cpp: a request trace from Azure Functions counts or a Zipf law
//   catalog  — catalog_command.cpp: a synthetic model catalog, or the mCache paper's seven models
//   simulate — simulate_command.cpp: the policy simulator
//   sweep    — sweep_command.cpp (engine: eval/sweep.hpp): many simulations in parallel
//   models   — models_command.cpp: a catalog written as dense model files
//   replay   — replay_command.cpp (engine: replay.hpp): a trace played against a live warmd
#pragma once

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "warm/error.hpp"

namespace warm::eval_cli {

// Exit statuses of every warm-eval command.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure =
    1;  // the work failed: unreadable or malformed input files, a write error
inline constexpr int exit_usage = 2;  // bad command line: unknown options, values out of range

// Prints "warm-eval <command>: <message>" on stderr and returns `rc`, for one-line error exits.
inline int report(const std::string& command, const warm::error& e, int rc) {
  std::cerr << "warm-eval " << command << ": " << e.message << "\n";
  return rc;
}

void add_trace_command(CLI::App& app, int& rc);
void add_catalog_command(CLI::App& app, int& rc);
void add_simulate_command(CLI::App& app, int& rc);
void add_sweep_command(CLI::App& app, int& rc);
void add_models_command(CLI::App& app, int& rc);
void add_replay_command(CLI::App& app, int& rc);

}  // namespace warm::eval_cli
