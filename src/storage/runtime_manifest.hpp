// warm.json: a model served by a model runtime that speaks ModelMesh's interface
// (schemas/model_runtime.proto). A version directory holding warm.json is a model whose files warm
// does not read itself: the manifest names the model's type, where its files are and an opaque
// key, and all three are passed to the runtime's loadModel as ModelMesh passes them.
//
//   {"type": "sklearn", "path": "model.joblib", "key": {"anything": "the runtime reads"}}
//
// - type: 1..64 of [a-z0-9_.-], not a kind warm serves itself ("dense", "torchscript").
// - path: optional, relative to the manifest's directory (the version directory); "." or absent is
//   the directory itself. No absolute path, no "..", no NUL, at most 1024 bytes. It must lead to a
//   file or directory beneath the repository root (symlinks resolved).
// - key: optional; a string is passed as it is, any other JSON value as its compact text; at most
//   16 KiB.
// Anything else in the object is refused (a misspelt field is an error, not a silent default).
// The file itself is at most 64 KiB. A manifest is untrusted input: every violation is
// invalid_argument naming the manifest and what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "warm/error.hpp"
#include "warm/model_repository.hpp"

namespace warm {

inline constexpr const char* manifest_file_name = "warm.json";
inline constexpr std::size_t manifest_max_bytes = 64 * 1024;
inline constexpr std::size_t manifest_max_key = 16 * 1024;

struct runtime_manifest {
  std::string type;
  std::string path = ".";  // relative to the manifest's directory
  std::string key;
};

// Whether `path`'s last component is warm.json.
bool is_manifest(const std::string& path);

// Parses a manifest's text; `display` names it in messages.
expected<runtime_manifest> parse_runtime_manifest(std::string_view text,
                                                  const std::string& display);

// Reads and parses the manifest `where` names, opened confined to its root (open_located) and
// read up to manifest_max_bytes. Blocking I/O.
expected<runtime_manifest> read_runtime_manifest(const model_location& where);

// The canonical path of the manifest's files (a file or a directory): `manifest.path` resolved
// against the manifest's directory, symlinks followed; invalid_argument when it leads outside
// `where.root` (when there is one), not_found when it does not exist. Blocking I/O.
expected<std::string> manifest_target(const model_location& where,
                                      const runtime_manifest& manifest);

// The bytes of the manifest's files: a file's size, or the sum of the regular files beneath a
// directory (symlinks not followed; at most 100,000 entries, else invalid_argument). What a
// model is predicted to take before its runtime says better. Blocking I/O.
expected<std::uint64_t> manifest_target_bytes(const std::string& target);

}  // namespace warm
