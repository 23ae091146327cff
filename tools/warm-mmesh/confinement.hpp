// The confinement warm-mmesh --exec puts on the runtime it starts (docs/runtimes.md, "Runtimes
// that speak ModelMesh's interface"): a model runtime loads models that are code (a pickle), so
// the runtime, and every program it execs, may read only the system's libraries, the
// repositories it serves and its own program's files, write only its private directory, open no
// TCP/UDP socket, debug no process, and dump no core. Built from warm's sandbox library
// (src/sandbox/sandbox.hpp).
//
// Two halves: plan_confinement (in the bridge, before fork: reads files, looks the user up, may
// fail with a message) and confine_child (in the forked child, before execve).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "warm/error.hpp"

namespace warm::mmesh {

// What the bridge was told. Defaults: confined, no extra paths, root dropped to nobody.
struct confinement_options {
  // --no-confine or WARM_MMESH_CONFINE=0 clear it: the runtime runs with the bridge's rights.
  bool enabled = true;
  // Extra paths the runtime may read (--read PATH, WARM_MMESH_READ=PATH:PATH).
  std::vector<std::string> read;
  // Started as root, the runtime runs as this user (keeping only CAP_DAC_READ_SEARCH, confined by
  // Landlock, so that repositories only root may read stay readable).
  std::string user = "nobody";
};

// What the runtime may touch, before the kernel's view of it (pure data).
struct runtime_paths {
  std::vector<std::string> repositories;  // WARM_RUNTIME_REPOS: read
  std::vector<std::string> extra_read;    // --read, WARM_MMESH_READ, the program's declaration
  std::string program;                    // the command's program, resolved; empty: unknown
  std::string private_dir;                // the runtime's own directory: write
};

// The Landlock rules for `p` (pure; see confinement.cpp for why each path is there). Paths under
// /proc/self are meant to be resolved in the child (build the ruleset there).
sandbox::fs_rules runtime_rules(const runtime_paths& p);

// "a:b::c" -> {"a", "b", "c"}: a colon-separated list, empty entries dropped.
std::vector<std::string> split_paths(const std::string& text);

// The program a `/bin/sh -c 'exec COMMAND'` runs: COMMAND's first word (quotes stripped), found
// on `path_env` when it has no '/', made absolute against the working directory, symlinks
// resolved. Empty when it cannot be found (a shell builtin, an expansion): the runtime then gets
// no rule for it.
std::string command_program(const std::string& command, const std::string& path_env);

// The paths COMMAND's other words name: every word after the first (and the value of a
// --flag=VALUE) that has a '/' in it and names an existing file or directory, made absolute. A
// runtime is meant to read what its command line gives it (a script for an interpreter, a
// directory of schemas); a file grants that file, not its directory.
std::vector<std::string> command_paths(const std::string& command);

// The paths a script program declares it reads, in a comment line among its first 4 KiB:
//   # warm-mmesh-read: /abs/path:relative/to/the/script's/directory
// (several such lines add up). Empty for a program that is not a "#!" script, has none, or
// cannot be read.
std::vector<std::string> declared_read_paths(const std::string& program);

// "0", "false", "no", "off" -> false; "", "1", "true", "yes", "on" -> true; else invalid_argument.
expected<bool> parse_confine_env(const std::string& value);

// Everything the child needs, prepared in the bridge. Move-only by its members; not thread-safe.
struct confinement_plan {
  sandbox::fs_rules files;
  sandbox::syscall_rules syscalls;      // deny_exec off: sh -> launcher -> interpreter
  std::optional<sandbox::identity> as;  // set when the bridge runs as root
};

// Plans the confinement of `command` running in `private_dir`, with `repositories`: resolves the
// program, reads its declaration, and, when this process runs as root, looks options.user up and
// gives it `private_dir` (chown) so that it can make its socket there. Errors name what failed
// (no such user, chown refused). Call it before fork.
expected<confinement_plan> plan_confinement(const confinement_options& options,
                                            const std::string& command,
                                            const std::vector<std::string>& repositories,
                                            const std::string& private_dir);

// In the forked child (single-threaded; may allocate), before execve: builds the Landlock
// ruleset (here, so /proc/self is the child's), sets RLIMIT_CORE 0, drops to plan.as (keeping
// CAP_DAC_READ_SEARCH across execve as an ambient capability, only when Landlock confines it),
// restricts itself with Landlock and installs the seccomp filter. Everything it applies carries
// across execve. Returns an empty string on success, or what failed; without Landlock in the
// kernel it goes on and puts a warning in `warning`. Re-arms PR_SET_PDEATHSIG after the user
// change (which clears it).
std::string confine_child(const confinement_plan& plan, std::string& warning);

}  // namespace warm::mmesh
