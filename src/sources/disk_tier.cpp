#include "sources/disk_tier.hpp"
