#include "sources/s3_store.hpp"
