// Fuzz target: warmd's config file (tools/warmd/config: apply_config_text on the input as TOML
// text), then the checks warmd's main runs on what it set: durations (parse_duration) and sizes
// (warm::parse_bytes). toml++ throws toml::parse_error for malformed text; it must never escape.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tools/warmd/config.hpp"
#include "fuzz_check.hpp"
#include "warm/units.hpp"

namespace {

void check_duration(const std::string& text) {
  auto d = warm::warmd::parse_duration(text);
  if (d)
    FUZZ_CHECK(d->count() >= 0 && d->count() <= 1'000'000'000LL * 1'000'000'000LL);
  else
    FUZZ_CHECK(d.error().code == warm::errc::invalid_argument);
}

void check_size(const std::string& text) {
  auto b = warm::parse_bytes(text);
  if (b)
    FUZZ_CHECK(*b <= (std::uint64_t{1} << 63));
  else
    FUZZ_CHECK(b.error().code == warm::errc::invalid_argument);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CLI::App app{"warmd"};
  warm::warmd::config c;
  std::string config_file;
  warm::warmd::add_options(app, c, config_file);
  auto applied = warm::warmd::apply_config_text(text, "fuzz.toml", app, c);
  if (!applied) {
    FUZZ_CHECK(applied.error().code == warm::errc::invalid_argument);
    FUZZ_CHECK(applied.error().message.rfind("fuzz.toml: ", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(c.max_concurrent_loads >= 1 && c.max_concurrent_loads <= 64);
  FUZZ_CHECK(c.http_threads >= 1 && c.http_threads <= 1024);
  FUZZ_CHECK(c.max_models >= 1);
  check_duration(c.failure_expiry);
  check_duration(c.request_timeout);
  check_size(c.max_request_bytes);
  check_size(c.max_tensor_bytes);
  return 0;
}
