// Models in remote stores: resolving what a registration names (an object URL, or a path relative
// to a remote repository root) to one model file object, the way model_repository does on disk:
// <root>/<model>/<version>/<model file>, versions positive integers, the highest chosen unless
// one is asked for. Blocks on the network: runs on offload and loader threads, never an actor's.
// Thread-safe (the stores are).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sources/object_store.hpp"
#include "storage/file_arrival.hpp"
#include "warm/model_repository.hpp"

namespace warm::sources {

// One model file in a remote store.
struct remote_model {
  object_info object;
  std::string name;  // its file name: model.safetensors or model.pt
  std::optional<std::uint64_t> version;
};

struct remote_stores {
  std::shared_ptr<object_store> s3;    // null: s3:// sources refused
  std::shared_ptr<object_store> http;  // null: http(s):// sources refused
  fetch_options fetch;
};

class remote_repository {
 public:
  // `roots`: remote repository roots ("s3://bucket/prefix", "https://host/models"), each parsed by
  // parse_object_url; invalid_argument for one that does not parse or whose store is missing.
  static expected<remote_repository> create(const std::vector<std::string>& roots,
                                            remote_stores stores);

  const std::vector<object_url>& roots() const { return roots_; }
  bool has_roots() const { return !roots_.empty(); }

  // Resolves `path`: an object URL (a model file, a version directory or a model directory), or a
  // path relative to each remote root in order. A model file is looked at (HEAD); a directory is
  // listed (S3) or probed for the model file names (HTTP, which cannot list). invalid_argument for
  // a path that escapes its root ("..", absolute) or a URL that does not parse; not_found when no
  // root holds it.
  expected<remote_model> resolve(const std::string& path,
                                 std::optional<std::uint64_t> version = {}) const;

  // The store that serves `url`'s scheme (never null for a URL resolve accepted).
  object_store* store_for(const object_url& url) const;
  const fetch_options& fetch() const { return stores_.fetch; }

 private:
  remote_repository(std::vector<object_url> roots, remote_stores stores)
      : roots_(std::move(roots)), stores_(std::move(stores)) {}
  expected<remote_model> resolve_url(const object_url& url,
                                     std::optional<std::uint64_t> version) const;

  std::vector<object_url> roots_;
  remote_stores stores_;
};

// The location of a local copy of `model` at `path`: its version, its kind (from its file
// name), and its source URL, entity tag and size as `model` describes them. No root: the caller
// sets one when the copy lies beneath it.
model_location copy_location(const remote_model& model, std::string path);

// Fetches `model` into the file at `path` (created or truncated, mode 0600, not followed if a
// symlink) with the repository's fetch options. An object replaced during the fetch is looked at
// again and fetched again from the start (up to 3 times) while its size stays the `reserved` bytes;
// `model` is updated to what was fetched. When the new size differs the answer has `changed` set
// and `model` describes the new object (the caller reserves again). The file's bytes are the
// object's only when the answer is a value without `changed`.
// With `arrival`, readers may follow the fetch: it is given a descriptor of the file, told each
// range written and restarted when the fetch starts over; the caller finishes it.
expected<fetch_stats> fetch_to_file(const remote_repository& repository, remote_model& model,
                                    const std::string& path, std::uint64_t reserved,
                                    file_arrival* arrival = nullptr);

}  // namespace warm::sources
