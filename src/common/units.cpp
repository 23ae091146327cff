#include "warm/units.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace warm {
namespace {

struct unit {
  std::string_view suffix;
  double scale;
};

// Longest suffixes first so "KiB" is not read as "K" + garbage.
constexpr std::array<unit, 14> units{{
    {"kib", 1024.0},
    {"mib", 1024.0 * 1024},
    {"gib", 1024.0 * 1024 * 1024},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
    {"kb", 1e3},
    {"mb", 1e6},
    {"gb", 1e9},
    {"tb", 1e12},
    {"k", 1024.0},
    {"m", 1024.0 * 1024},
    {"g", 1024.0 * 1024 * 1024},
    {"t", 1024.0 * 1024 * 1024 * 1024},
    {"b", 1.0},
    {"", 1.0},
}};

bool ends_with_ci(std::string_view text, std::string_view suffix) {
  if (suffix.size() > text.size()) return false;
  auto tail = text.substr(text.size() - suffix.size());
  for (std::size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(tail[i])) != suffix[i]) return false;
  return true;
}

}  // namespace

expected<std::uint64_t> parse_bytes(std::string_view text) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_argument, "bad byte size '" + std::string(text) + "': " + why);
  };
  std::string_view body = text;
  while (!body.empty() && body.back() == ' ')
    body.remove_suffix(1);
  for (const auto& u : units) {
    if (!ends_with_ci(body, u.suffix)) continue;
    auto number = body.substr(0, body.size() - u.suffix.size());
    while (!number.empty() && number.back() == ' ')
      number.remove_suffix(1);
    if (number.empty()) return bad("no number");
    // Digits with at most one '.', nothing else (no sign, exponent, hex, inf or nan).
    int dots = 0;
    for (char c : number) {
      if (c == '.') {
        ++dots;
      } else if (!std::isdigit(static_cast<unsigned char>(c))) {
        return bad("expected a number with an optional unit such as MiB or GB");
      }
    }
    if (dots > 1 || number == ".") return bad("malformed number");
    double value = std::strtod(std::string(number).c_str(), nullptr) * u.scale;
    if (!(value < 9.2e18)) return bad("too large");
    return static_cast<std::uint64_t>(std::floor(value));
  }
  return bad("unknown unit");
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int index = 0;
  while (value >= 1024.0 && index < 5) {
    value /= 1024.0;
    ++index;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer,
                value < 10    ? "%.2f %s"
                : value < 100 ? "%.1f %s"
                              : "%.0f %s",
                value, names[index]);
  return buffer;
}

expected<std::chrono::nanoseconds> parse_duration(std::string_view in) {
  const std::string text(in);
  auto bad = make_error(errc::invalid_argument,
                        "bad duration \"" + text + "\" (expected e.g. 500ms, 30s, 10m, 1h)");
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return bad;
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) return bad;  // "1.2.3s": stod stops at the second dot
  } catch (...) {
    return bad;
  }
  auto unit = text.substr(i);
  double seconds = 0;
  if (unit.empty() || unit == "s")
    seconds = value;
  else if (unit == "ms")
    seconds = value / 1000;
  else if (unit == "us")
    seconds = value / 1e6;
  else if (unit == "m" || unit == "min")
    seconds = value * 60;
  else if (unit == "h")
    seconds = value * 3600;
  else
    return bad;
  if (!(seconds >= 0) || seconds > 1e9) return bad;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

}  // namespace warm
