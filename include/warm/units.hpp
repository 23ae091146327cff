// Byte quantities as users type and read them: "512MiB", "1.5GiB", "4096".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "warm/error.hpp"

namespace warm {

// Parses a byte count: a non-negative decimal number (fraction allowed) with an optional unit,
// B, KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024), case-insensitive for
// the prefix letter; "K", "M", "G", "T" alone mean the binary units. The result is rounded down
// to whole bytes. Fails with invalid_argument on anything else, including values past 2^63.
expected<std::uint64_t> parse_bytes(std::string_view text);

// Parses a duration: a non-negative decimal number (fraction allowed) with an optional unit, us,
// ms, s (the default), m or min, h; at most 10^9 seconds. invalid_argument on anything else.
expected<std::chrono::nanoseconds> parse_duration(std::string_view text);

// Formats a byte count for people: "0 B", "512 B", "1.50 KiB", "64.0 MiB", "1.00 GiB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace warm
