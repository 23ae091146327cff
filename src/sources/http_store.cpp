#include "sources/http_store.hpp"
