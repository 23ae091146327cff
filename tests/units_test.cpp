#include <catch2/catch.hpp>

#include "warm/device.hpp"
#include "warm/units.hpp"

TEST_CASE("byte sizes parse in the units people type") {
  CHECK(warm::parse_bytes("4096").value() == 4096);
  CHECK(warm::parse_bytes("4096B").value() == 4096);
  CHECK(warm::parse_bytes("1KiB").value() == 1024);
  CHECK(warm::parse_bytes("1kb").value() == 1000);
  CHECK(warm::parse_bytes("256MiB").value() == 256ull << 20);
  CHECK(warm::parse_bytes("1.5GiB").value() == 3ull << 29);
  CHECK(warm::parse_bytes("70GiB").value() == 70ull << 30);
  CHECK(warm::parse_bytes("2G").value() == 2ull << 30);
  CHECK(warm::parse_bytes("1TB").value() == 1'000'000'000'000ull);
  for (const char* bad :
       {"", "GiB", "-1GiB", "1e9", "1..2MiB", "12 parsecs", "0x10", "inf", "99999999999TiB"}) {
    INFO(bad);
    auto r = warm::parse_bytes(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
  }
  CHECK(warm::format_bytes(512) == "512 B");
  CHECK(warm::format_bytes(1536) == "1.50 KiB");
  CHECK(warm::format_bytes(64ull << 20) == "64.0 MiB");
}

TEST_CASE("byte sizes are written in the largest unit they reach, at its exact boundary too") {
  CHECK(warm::format_bytes(1023) == "1023 B");
  CHECK(warm::format_bytes(1024) == "1.00 KiB");
  CHECK(warm::format_bytes(1ull << 20) == "1.00 MiB");
  CHECK(warm::format_bytes(1ull << 30) == "1.00 GiB");
}

TEST_CASE("device specs parse as users write them") {
  auto host = warm::parse_device_spec("host:4GiB");
  REQUIRE(host);
  CHECK(host->type == warm::device_spec::kind::host);
  CHECK(*host->capacity == 4ull << 30);
  auto gpu = warm::parse_device_spec("cuda:1:70GiB");
  REQUIRE(gpu);
  CHECK(gpu->type == warm::device_spec::kind::cuda);
  CHECK(gpu->ordinal == 1);
  CHECK(*gpu->capacity == 70ull << 30);
  CHECK_FALSE(warm::parse_device_spec("cuda:0")->capacity);
  CHECK_FALSE(warm::parse_device_spec("host")->capacity);
  auto part = warm::parse_device_spec("host.2:1MiB");
  REQUIRE(part);
  CHECK(part->partition == 2);
  CHECK(part->to_string() == "host.2:1048576");
  CHECK(warm::parse_device_spec("host")->partition == -1);
  CHECK((*warm::make_device(*part))->name() == "host.2");
  for (const char* bad : {"", "host.", "host.x", "host.-1", "tpu:0", "cuda", "cuda:x",
                          "cuda:-1:1GiB", "host:0", "host:lots", "host:1GiB:2", "cuda:0:1GiB:3"}) {
    INFO(bad);
    auto r = warm::parse_device_spec(bad);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("bad device"));
  }
}

TEST_CASE("a CUDA device without a GPU is unavailable, not a crash") {
  if (warm::cuda_device_count()) return;  // a machine with a GPU: covered by cuda_device_test
  auto dev = warm::make_device(warm::parse_device_spec("cuda:0:1GiB").value());
  REQUIRE_FALSE(dev);
  CHECK(dev.error().code == warm::errc::unavailable);
  CHECK_THAT(dev.error().message, Catch::Contains("no CUDA device"));
  // Said in a user's words, whichever way the machine lacks a GPU (no driver, no device, no CUDA
  // in the build).
  CHECK_THAT(dev.error().message,
             Catch::Contains("no NVIDIA GPU") || Catch::Contains("built without CUDA"));
}
