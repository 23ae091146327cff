#include "sources/object_url.hpp"
