// Model repositories: directory trees <root>/<model-name>/<version>/<model file>, the layout of
// TensorFlow Serving (versions are positive decimal integers). The model file's name says which
// backend serves it: model.safetensors (dense) or model.pt (torchscript). A repository resolves a
// model path given relative to one of its roots and confines it there: absolute paths, ".." and
// symlinks that lead outside every root are refused, when the path is resolved and again each
// time the file is opened (the walk starts from a handle on the root directory and may not leave
// it, so a directory or file swapped for a symlink after registration cannot lead outside).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm {

class file_arrival;  // storage/file_arrival.hpp (internal)

inline constexpr const char* model_file_name = "model.safetensors";

// The model files a version directory may hold (exactly one of them), and the backend each means.
struct model_file_kind {
  const char* file;
  const char* kind;
};
inline constexpr model_file_kind model_file_kinds[] = {{"model.safetensors", "dense"},
                                                       {"model.pt", "torchscript"}};

// A version directory may instead hold warm.json, a manifest for a model a model runtime serves
// (its files are read by the runtime, not by warm; storage/runtime_manifest.hpp). Its kind is the
// manifest's "type": kind_of_file answers this placeholder, and resolving reads the manifest.
inline constexpr const char* manifest_kind = "manifest";

// The backend a model file's name means: "torchscript" for a name ending in .pt, manifest_kind for
// warm.json, else "dense" (a file named directly is validated by that backend, which says what is
// wrong with it).
std::string kind_of_file(const std::string& path);

// Where a model's file is: its canonical path, and the repository root it must stay beneath
// whenever it is opened (open_model_file(const model_location&)). The root is opened by its path
// at each open, so a root directory moved away and back (or replaced) is followed like the path.
struct model_location {
  std::string path;  // canonical path of the model file, below `root`
  std::string root;  // canonical path of its repository root; empty only for an unconfined path
  // The version directory (<model>/<version>/<model file>) resolution chose, as asked for or
  // the highest; none when a model file was named directly.
  std::optional<std::uint64_t> version;
  // The backend that serves it (kind_of_file of the path; a manifest's type for warm.json).
  std::string kind = "dense";
  // For a model from a remote source: the object's URL ("s3://bucket/key", "https://..."), and
  // its entity tag and size as the source last described them. `path` is then its copy in the
  // local disk tier, beneath the tier's root, and may be gone when the tier evicted it: a load
  // fetches it again first. Empty for a model on this machine's disk.
  std::string source;
  std::string source_etag;
  std::uint64_t source_bytes = 0;
  // A remote model's copy whose bytes are still arriving (a fetch in flight, or only its header
  // fetched): opened through it, each read waiting for its bytes. Set only on a location handed
  // to one load or describe, never on one kept.
  std::shared_ptr<const file_arrival> arriving;

  // A location that is not confined (offline tools and tests that name a file directly).
  static model_location unconfined(std::string path) {
    model_location out;
    out.kind = kind_of_file(path);
    out.path = std::move(path);
    return out;
  }
};

// A version directory's name as its number: a positive decimal integer of at most 18 digits,
// without sign or leading zeros; nullopt for anything else ("007", "0", "latest").
std::optional<std::uint64_t> parse_version(const std::string& name);

// The versions present under a model directory (numeric sub-directories holding a model file),
// ascending. not_found when the directory does not exist.
expected<std::vector<std::uint64_t>> list_versions(const std::string& model_dir);

// Finds the model file for `path`, which may be a model file, a version directory holding one,
// or a model directory (then `version`, or else the highest version, is
// chosen). No confinement: for offline tools given a path by the user.
expected<std::string> find_model_file(const std::string& path,
                                      std::optional<std::uint64_t> version = {});

// A version directory of a model directory, as one look found it: its model file and that file's
// identity (a file that is still being written changes it between looks).
struct version_file {
  std::uint64_t version = 0;
  std::string path;  // the model file's canonical path
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;  // its modification time (nanoseconds since the epoch)
  std::uint64_t inode = 0;
  bool same_file(const version_file& o) const {
    return path == o.path && size == o.size && mtime_ns == o.mtime_ns && inode == o.inode;
  }
};

class model_repository {
 public:
  // Validates the roots: each must be an existing directory. Stores their canonical paths.
  static expected<model_repository> create(const std::vector<std::string>& roots);

  const std::vector<std::string>& roots() const { return roots_; }

  // Resolves `relative` (e.g. "mnist" or "mnist/3") against each root in order and returns the
  // model file's canonical path with its root. invalid_argument for an empty or absolute path, a
  // NUL byte, or one that resolves (symlinks included) outside the root; not_found when no root
  // holds it.
  expected<model_location> resolve(const std::string& relative,
                                   std::optional<std::uint64_t> version = {}) const;

  // The version directories of model directory `relative` (in the first root that holds it) that
  // hold one regular model file, ascending, with each file's identity. Confined like resolve: a
  // directory or model file leading outside the root is invalid_argument (a version's) or left
  // out (a version whose file does: it is never served). not_found when no root holds the
  // directory. Blocks on the file system.
  expected<std::vector<version_file>> look_at_versions(const std::string& relative) const;
  // The canonical path of model directory `relative` in the first root that holds it, confined
  // like look_at_versions. Blocks on the file system.
  expected<std::string> find_directory(const std::string& relative) const;

 private:
  explicit model_repository(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  std::vector<std::string> roots_;
};

}  // namespace warm
