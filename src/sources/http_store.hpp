// Plain HTTP(S) sources over libcurl: HEAD and ranged GETs of a file a web server serves (nginx,
// a CDN). An HTTP server cannot be listed: models on one are named file by file.
#pragma once

#include <memory>
#include <string>

#include "sources/object_store.hpp"

namespace warm::sources {

struct http_options {
  std::string ca_file;  // extra CA bundle (empty: the system's)
};

std::unique_ptr<object_store> make_http_store(http_options options = {});

}  // namespace warm::sources
