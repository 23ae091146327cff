// Runtime logic takes time from its caller (see warm/clock.hpp); this header names the type.
#pragma once

#include "warm/clock.hpp"
