// What the S3 and HTTP stores share over libcurl: one request with its status and headers, and
// the concurrent ranged fetch (a curl multi handle on the calling thread, `streams` ranges in
// flight). Internal to src/sources.
#pragma once

#include "sources/object_store.hpp"
