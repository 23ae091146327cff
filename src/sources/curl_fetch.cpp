#include "sources/curl_fetch.hpp"
