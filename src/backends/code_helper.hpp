// Describing a model whose file is code (TorchScript) in a short-lived helper process instead of
// the caller's: the parent side (start the helper on the confined file, wait within a deadline,
// read its answer) and the JSON the two sides speak.
//
// The helper (warm-runtime --describe) limits its own memory and CPU time, confines itself
// (no files but the system's libraries, nothing written, no network, no programs started) and
// only then reads the archive from descriptor 3. A hostile archive can at worst crash it, spin
// until the deadline or exhaust its limits: each is one model refused with the reason.
#pragma once

#include <string>
#include <string_view>

#include "warm/backend.hpp"

namespace warm {

// The helper's answer: {"kind", "predicted_bytes", "layers", "activation", "io": {"inputs":
// [{"name", "datatype", "shape", "known"}], "outputs": [...], "batched"}} for a description,
// {"error": {"code", "message"}} for a refusal.
std::string description_to_json(const model_description& d);
std::string error_to_json(const error& e);

// Reads a helper's answer (either form). Everything in it is checked as untrusted input: a
// malformed answer, an unknown datatype or code, names or shapes out of bounds are
// invalid_argument naming `path`; a refusal comes back as the error it carries.
expected<model_description> description_from_json(std::string_view text, const std::string& path);

// Runs `policy.describe_helper --describe` on the file at `where` (opened beneath its root here
// and handed over as descriptor 3; the helper opens nothing itself) and returns its answer.
// Blocks the calling thread up to policy.describe_deadline, after which the helper is killed
// (invalid_argument: "did not describe within 30 s"); a helper that dies is invalid_argument with
// the signal or status. Always reaps the helper. Never call it on an actor's thread.
expected<model_description> describe_in_helper(const model_location& where,
                                               const code_policy& policy);

}  // namespace warm
