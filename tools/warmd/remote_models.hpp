// --serve-repo over remote repository roots: the model directories of an S3 root, listed with
// warmd's S3 settings (--s3-endpoint, --s3-region, the AWS credentials of its environment). An
// HTTP(S) root cannot be listed and is refused (docs/versions.md).
#pragma once

#include "config.hpp"
#include "served_config.hpp"

namespace warm::warmd {

// Lists a remote root's model directories (sources::remote_repository_models) with a store made
// from `c`'s S3 settings at each call (so rotated credentials are read again). The function
// answers invalid_argument for an HTTP(S) root or malformed S3 settings, the store's error when the
// listing fails. It blocks on the network: call it from warmd's main thread (the rescan, a
// reload), never from an actor's.
remote_models_fn remote_models(const config& c);

}  // namespace warm::warmd
