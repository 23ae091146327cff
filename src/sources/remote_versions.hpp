// The versions of a model directory in S3, found by listing its prefix: the remote counterpart of
// model_repository::look_at_versions, by the same rules. A model directory `<dir>` holds version
// `v` when the key `<dir>/<v>/<model file>` exists, `v` a version directory's name that
// parse_version accepts ("7", not "007" or "0") and the model file exactly one of
// model_file_kinds (model.safetensors or model.pt: a version holding both, or neither, is not a
// version, as on disk). Every other key (deeper ones, temporary uploads, junk) is passed over.
//
// A listing is untrusted input: it may be long, unsorted, repeat keys, or hold keys of any length.
// Keys longer than max_listed_key_bytes are passed over, and a listing of more than
// max_listed_objects objects is refused whole (invalid_argument), so one bucket cannot make warm
// hold or scan an unbounded list.
//
// The pure functions take what object_store::list answered (every page, in any order); the two
// look_* functions list and then call them. Those block on the network: call them from an offload
// or executor thread, never from an actor's. Thread-safe (the stores are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sources/object_store.hpp"
#include "sources/remote_repository.hpp"
#include "warm/model_repository.hpp"

namespace warm::sources {

inline constexpr std::size_t max_listed_objects = max_list_objects;  // as a store lists
inline constexpr std::size_t max_listed_key_bytes = 1024;            // S3's own limit on a key

// One version of a model directory in a store: its number and its model file's object (URL, size,
// entity tag).
struct remote_version {
  std::uint64_t version = 0;
  object_info object;
};

// The versions of model directory `dir` (an S3 URL; a trailing '/' is not needed) in `listing`,
// ascending, one per version. Objects outside `dir`'s prefix are passed over. invalid_argument
// when the listing holds more than max_listed_objects objects.
expected<std::vector<remote_version>> versions_in_listing(const object_url& dir,
                                                          const std::vector<object_info>& listing);

// The model directories directly below repository root `root` (an S3 URL) that hold at least one
// version by versions_in_listing's rules, by name, ascending and distinct. A name that is not a
// plain path segment is passed over. invalid_argument as versions_in_listing.
expected<std::vector<std::string>> models_in_listing(const object_url& root,
                                                     const std::vector<object_info>& listing);

// A remote version as the version settler looks at a version_file: `path` is the object's URL,
// `size` its size, `inode` a hash of its entity tag (so a replaced object, with a new tag or
// size, is another file) and `mtime_ns` 0: an object appears whole when its upload completes, so
// it is settled at its first look.
version_file as_version_file(const remote_version& v);

// Lists model directory `dir` in `store` and answers its versions as version files (ascending).
// not_found when nothing at all lies below the prefix (no such model directory; a directory that
// holds keys but no version answers an empty list, as an empty directory does on disk); the
// store's error when the listing fails (access denied, unavailable). Blocks on the network.
expected<std::vector<version_file>> look_at_remote_versions(object_store& store,
                                                            const object_url& dir);

// look_at_remote_versions for a served model's base path: an s3:// URL of its model directory, or
// a path relative to the repository's roots (each S3 root in order, the first that holds it;
// HTTP roots cannot be listed and are passed over). invalid_argument for an HTTP(S) URL ("an
// HTTP source cannot be listed") or a path that does not parse or escapes its root; not_found
// when no S3 root holds it (or there is none). Blocks on the network.
expected<std::vector<version_file>> look_at_remote_versions(const remote_repository& repository,
                                                            const std::string& base);

// The model directories of S3 repository root `root` (for --serve-repo), by models_in_listing.
// invalid_argument for an HTTP(S) root, which cannot be listed; the store's error when the
// listing fails. Blocks on the network.
expected<std::vector<std::string>> remote_repository_models(object_store& store,
                                                            const object_url& root);

}  // namespace warm::sources
