// Helpers shared by the evaluation files (catalog, trace, the simulators): strict CSV reading and
// number parsing with line numbers for errors, exact text for doubles, whole-file writes, and
// random numbers that are identical on every platform (std distributions are not), trace times as
// timestamps. Internal to src/eval; not part of warm's public interface.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warm/clock.hpp"
#include "warm/error.hpp"

namespace warm::eval::detail {

// Reads a text file line by line: strips a trailing CR (files written on Windows) and a UTF-8
// byte-order mark on the first line, and counts lines (1-based) for error messages.
class line_reader {
 public:
  // not_found when `path` does not exist, invalid_argument when it is not a regular file,
  // load_failed when it cannot be opened. Messages name the path.
  static expected<line_reader> open(const std::string& path);

  // The next line into `line`; false at the end of the file (or on a read error: check failed()).
  bool next(std::string& line);
  // The number of the line last returned by next().
  std::size_t line_number() const { return line_; }
  const std::string& path() const { return path_; }
  // True when reading stopped on an I/O error rather than at the end of the file.
  bool failed() const { return in_.bad(); }
  // "PATH:LINE: what", an invalid_argument error about the line last returned.
  warm::error bad_line(const std::string& what) const;

 private:
  line_reader(std::ifstream in, std::string path) : in_(std::move(in)), path_(std::move(path)) {}
  std::ifstream in_;
  std::string path_;
  std::size_t line_ = 0;
};

// `text` without leading and trailing spaces and tabs.
std::string_view trim(std::string_view text);

// Splits a CSV line at commas (no quoting: the evaluation formats never quote) and trims each
// field. An empty line gives one empty field.
std::vector<std::string_view> split_fields(std::string_view line);

// A whole field as an unsigned decimal integer (digits only); nullopt otherwise or on overflow.
std::optional<std::uint64_t> parse_u64(std::string_view text);

// A whole field as a finite decimal floating-point number; nullopt otherwise (NaN, inf, junk).
std::optional<double> parse_finite(std::string_view text);

// The shortest decimal text that reads back as exactly `value` ("12.5", "1081.3429815040902").
std::string format_double(double value);

// True when `id` can be written as a CSV field: not empty, no comma, CR, LF or surrounding blanks.
bool valid_csv_id(std::string_view id);

// Writes `text` to `path`: creates missing parent directories, writes a temporary file beside it
// and renames it over `path`, so readers never see half a file. load_failed naming the path on
// any OS error.
expected<void> write_text_file(const std::string& path, const std::string& text);

// A seedable random stream: splitmix64 (Steele, Lea and Flood, OOPSLA 2014), 64 bits of state,
// statistically good enough for workload generation and the same numbers on every platform.
// `stream` separates independent uses of one user seed (e.g. request times vs model choices), so
// changing one use does not shift the numbers another one sees.
class random_stream {
 public:
  random_stream(std::uint64_t seed, std::uint64_t stream);
  std::uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Uniform integer in [0, n), n > 0 (rejection sampling: no modulo bias).
  std::uint64_t below(std::uint64_t n);

 private:
  std::uint64_t state_;
};

// A trace time (milliseconds from the trace's start) as a timestamp for a policy.
inline timestamp at_ms(double ms) {
  return timestamp{} + std::chrono::duration_cast<timestamp::duration>(
                           std::chrono::duration<double, std::milli>(ms));
}

}  // namespace warm::eval::detail
