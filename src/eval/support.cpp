#include "eval/support.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace warm::eval::detail {

namespace fs = std::filesystem;

expected<line_reader> line_reader::open(const std::string& path) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (!fs::exists(status))
    return make_error(errc::not_found, "cannot open " + path + ": no such file");
  if (!fs::is_regular_file(status))
    return make_error(errc::invalid_argument, path + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::load_failed, "cannot open " + path + ": " + std::strerror(errno));
  return line_reader(std::move(in), path);
}

bool line_reader::next(std::string& line) {
  if (!std::getline(in_, line)) return false;
  ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
  return true;
}

warm::error line_reader::bad_line(const std::string& what) const {
  return make_error(errc::invalid_argument, path_ + ":" + std::to_string(line_) + ": " + what);
}

std::string_view trim(std::string_view text) {
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && blank(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && blank(text.back()))
    text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    auto comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(trim(line.substr(start)));
      return fields;
    }
    fields.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_finite(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

std::string format_double(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return std::to_string(value);  // cannot happen with 64 bytes
  return std::string(buffer, end);
}

bool valid_csv_id(std::string_view id) {
  return !id.empty() && id.find_first_of(",\r\n") == std::string_view::npos && trim(id) == id;
}

expected<void> write_text_file(const std::string& path, const std::string& text) {
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return make_error(errc::load_failed,
                        "cannot create the directory of " + path + ": " + ec.message());
  }
  auto temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      return make_error(errc::load_failed, "cannot write " + path + ": " + std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      fs::remove(temporary, ec);
      return make_error(errc::load_failed, "cannot write " + path + ": " + std::strerror(errno));
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return make_error(errc::load_failed, "cannot write " + path + ": " + ec.message());
  }
  return {};
}

namespace {
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

random_stream::random_stream(std::uint64_t seed, std::uint64_t stream)
    : state_(mix64(seed + 0x9E3779B97F4A7C15ull) ^ mix64(stream * 0xD1B54A32D192ED03ull + 1)) {}

std::uint64_t random_stream::next() {
  return mix64(state_ += 0x9E3779B97F4A7C15ull);
}

std::uint64_t random_stream::below(std::uint64_t n) {
  // Reject the top partial block of 2^64 so every residue is equally likely.
  std::uint64_t limit = -n % n;  // = 2^64 mod n
  while (true) {
    std::uint64_t r = next();
    if (r >= limit) return r % n;
  }
}

}  // namespace warm::eval::detail
