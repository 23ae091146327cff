// What warmd serves as versioned models (docs/versions.md): the served-models file
// (--model-config) and --serve-repo, turned into the runtime's served_models_config. Re-read on
// SIGHUP and `warmctl reload`; a file with any error is refused whole.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/error.hpp"
#include "warm/versions.hpp"

namespace warm::warmd {

// A served-models file's text: `[[model]]` tables with name (required), base-path, versions,
// load-policy, labels, force-labels, size-hint, max-batch, max-queue-delay, preferred-batch,
// batch-queue.
// invalid_argument prefixed with `name` for malformed TOML, an unknown or mistyped key, a bad
// value (with its line), or a configuration check_served_models refuses. Never throws.
expected<served_models_config> parse_served_models(std::string_view text, const std::string& name);

// Lists the model directories of a remote repository root ("s3://bucket/prefix"): their names,
// or why they cannot be listed (remote_models.hpp makes one). Blocks on the network.
using remote_models_fn = std::function<expected<std::vector<std::string>>(const std::string& root)>;

// The model directories under `roots` that hold at least one version directory, by name (the
// first root holding a name wins); names that cannot be a served model's (not an id, or with '@')
// are left out. A remote root (s3://, http(s)://) is listed by `remote`; its error (an HTTP root,
// a store that refuses or cannot be reached, no `remote`) is the answer, so that a root that
// cannot be listed now never looks empty. Blocks on the file system and the network.
expected<std::vector<std::string>> repository_models(const std::vector<std::string>& roots,
                                                     const remote_models_fn& remote = {});

// What to serve: the file's models (none when `file` is empty), then, with `serve_repo`, every
// model directory of `roots` the file does not name, with the default policies. not_found when
// the file cannot be read; repository_models' error when a root cannot be listed.
expected<served_models_config> served_models_for(const std::string& file, bool serve_repo,
                                                 const std::vector<std::string>& roots,
                                                 const remote_models_fn& remote = {});

}  // namespace warm::warmd
