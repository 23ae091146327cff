// The zip archive check (src/storage/zip_check.hpp): archives built in memory by a small writer
// below (stored and deflate-flagged entries — the check never inflates, so "deflated" data is
// arbitrary bytes with declared sizes — optionally zip64), then patched field by field so that
// each rule is refused with its own message; every prefix of an archive refused without a crash.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "storage/zip_check.hpp"

using Catch::Matchers::Contains;
using warm::check_zip;
using warm::zip_limits;
using warm::zip_summary;

namespace {

void put16(std::string& s, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 2; ++i)
    s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put32(std::string& s, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 4; ++i)
    s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put64(std::string& s, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::string le(std::uint64_t v, int bytes) {
  std::string s(bytes, '\0');
  for (int i = 0; i < bytes; ++i)
    s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// One entry as the writer emits it.
struct zentry {
  std::string name;
  std::string data;                           // the bytes after the local header
  std::uint16_t method = 0;                   // 0 stored, 8 deflate
  std::optional<std::uint64_t> compressed;    // declared; default data.size()
  std::optional<std::uint64_t> uncompressed;  // declared; default data.size()
  std::string local_extra;
};

// Where the writer put things, for patching.
struct built {
  std::string bytes;
  std::vector<std::size_t> local_at, central_at;
  std::size_t directory_at = 0, directory_size = 0, eocd_at = 0;
  std::size_t zip64_at = 0, locator_at = 0;  // zip64 only
};

// A zip archive of `entries`. With `zip64`, every central header carries saturated sizes and
// offset and a zip64 extra field (uncompressed, compressed, offset), and the end record is
// saturated and preceded by a zip64 record and locator.
built build_zip(const std::vector<zentry>& entries, bool zip64 = false,
                const std::string& comment = "") {
  built b;
  std::string& s = b.bytes;
  for (const auto& e : entries) {
    std::uint64_t comp = e.compressed.value_or(e.data.size());
    std::uint64_t unc = e.uncompressed.value_or(e.data.size());
    b.local_at.push_back(s.size());
    s += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) + le(0, 4);
    s += le(zip64 ? 0xFFFFFFFF : comp, 4) + le(zip64 ? 0xFFFFFFFF : unc, 4);
    s += le(e.name.size(), 2) + le(e.local_extra.size(), 2) + e.name + e.local_extra + e.data;
  }
  b.directory_at = s.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::uint64_t comp = e.compressed.value_or(e.data.size());
    std::uint64_t unc = e.uncompressed.value_or(e.data.size());
    std::string extra;
    if (zip64) extra = le(1, 2) + le(24, 2) + le(unc, 8) + le(comp, 8) + le(b.local_at[i], 8);
    b.central_at.push_back(s.size());
    s += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) +
         le(0, 4);
    s += le(zip64 ? 0xFFFFFFFF : comp, 4) + le(zip64 ? 0xFFFFFFFF : unc, 4);
    s += le(e.name.size(), 2) + le(extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4);
    s += le(zip64 ? 0xFFFFFFFF : b.local_at[i], 4) + e.name + extra;
  }
  b.directory_size = s.size() - b.directory_at;
  if (zip64) {
    b.zip64_at = s.size();
    s += le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4);
    s += le(entries.size(), 8) + le(entries.size(), 8) + le(b.directory_size, 8) +
         le(b.directory_at, 8);
    b.locator_at = s.size();
    s += le(0x07064b50, 4) + le(0, 4) + le(b.zip64_at, 8) + le(1, 4);
  }
  b.eocd_at = s.size();
  s += le(0x06054b50, 4) + le(0, 2) + le(0, 2);
  s += le(zip64 ? 0xFFFF : entries.size(), 2) + le(zip64 ? 0xFFFF : entries.size(), 2);
  s += le(zip64 ? 0xFFFFFFFF : b.directory_size, 4) + le(zip64 ? 0xFFFFFFFF : b.directory_at, 4);
  s += le(comment.size(), 2) + comment;
  return b;
}

// check_zip over `bytes` in memory; fails the test if the check reads outside the file.
warm::expected<zip_summary> check(const std::string& bytes, const zip_limits& limits = {}) {
  auto read_at = [&bytes](std::uint64_t offset, std::size_t size) -> warm::expected<std::string> {
    REQUIRE(offset <= bytes.size());
    REQUIRE(size <= bytes.size() - offset);
    return bytes.substr(offset, size);
  };
  return check_zip(bytes.size(), read_at, limits);
}

std::string message_of(const warm::expected<zip_summary>& r) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == warm::errc::invalid_argument);
  return r.error().message;
}

std::vector<zentry> three_stored() {
  return {{"archive/data.pkl", "pickle bytes", 0, {}, {}, {}},
          {"archive/data/0", std::string(100, 'w'), 0, {}, {}, {}},
          {"archive/version", "3\n", 0, {}, {}, {}}};
}

}  // namespace

TEST_CASE("a valid stored archive passes with its summary") {
  auto b = build_zip(three_stored(), false, "a comment");
  auto r = check(b.bytes);
  REQUIRE(r.has_value());
  CHECK(r->entries == 3);
  CHECK(r->total_bytes == 12 + 100 + 2);
  CHECK(r->largest_entry == 100);
  CHECK_FALSE(r->compressed);
  CHECK_FALSE(r->zip64);
}

TEST_CASE("an empty archive (only the end record) passes") {
  auto r = check(build_zip({}).bytes);
  REQUIRE(r.has_value());
  CHECK(r->entries == 0);
  CHECK(r->total_bytes == 0);
}

TEST_CASE("deflate-flagged entries pass and are reported as compressed") {
  auto b = build_zip({{"a", std::string(30, 'x'), 8, {}, 900, {}},
                      {"dir/", "", 0, {}, {}, {}},
                      {"empty", "", 8, {}, 0, {}}});
  auto r = check(b.bytes);
  REQUIRE(r.has_value());
  CHECK(r->compressed);
  CHECK(r->total_bytes == 900);
}

TEST_CASE("a valid zip64 archive passes, its sizes and offsets taken from the extra fields") {
  auto b = build_zip(three_stored(), true);
  auto r = check(b.bytes);
  REQUIRE(r.has_value());
  CHECK(r->zip64);
  CHECK(r->entries == 3);
  CHECK(r->total_bytes == 114);
  CHECK(r->largest_entry == 100);
}

TEST_CASE("zip64 values larger than 32 bits are read from the extra field") {
  std::uint64_t five_gib = std::uint64_t{5} << 30;
  auto b = build_zip({{"big", "0123456789", 8, {}, five_gib, {}}}, true);
  zip_limits limits;
  limits.max_ratio = 1e12;
  limits.max_entry_bytes = limits.max_total_bytes = std::uint64_t{4} << 30;
  CHECK_THAT(message_of(check(b.bytes, limits)),
             Contains("zip entry 'big': declares 5368709120 bytes, over the limit of 4294967296"));
  limits.max_entry_bytes = limits.max_total_bytes = five_gib;
  CHECK(check(b.bytes, limits).has_value());
}

TEST_CASE("a zip64 record with no saturated 32-bit field is still used and checked") {
  auto b = build_zip(three_stored(), true);
  put16(b.bytes, b.eocd_at + 8, 3);
  put16(b.bytes, b.eocd_at + 10, 3);
  put32(b.bytes, b.eocd_at + 12, b.directory_size);
  put32(b.bytes, b.eocd_at + 16, b.directory_at);
  CHECK(check(b.bytes).has_value());
  put16(b.bytes, b.eocd_at + 10, 2);
  CHECK_THAT(message_of(check(b.bytes)),
             Contains("entry count 2 disagrees with the zip64 record's 3"));
}

TEST_CASE("0xFFFFFFFF sizes without a zip64 extra field are refused") {
  auto b = build_zip({{"a", "abc", 0, {}, {}, {}}});
  put32(b.bytes, b.central_at[0] + 24, 0xFFFFFFFF);
  CHECK_THAT(message_of(check(b.bytes)),
             Contains("zip entry 'a': declares 0xFFFFFFFF sizes or offset but has no zip64 "
                      "extra field"));
}

TEST_CASE("a zip64 extra field too short for the saturated fields is refused") {
  auto b = build_zip({{"a", "abc", 0, {}, {}, {}}}, true);
  put16(b.bytes, b.central_at[0] + 46 + 1 + 2, 16);  // extra's data size: unc + comp only
  CHECK_THAT(message_of(check(b.bytes)), Contains("lacks the local header offset"));
}

TEST_CASE("a malformed extra field is refused") {
  auto b = build_zip({{"a", "abc", 0, {}, {}, {}}}, true);
  put16(b.bytes, b.central_at[0] + 46 + 1 + 2, 25);
  CHECK_THAT(message_of(check(b.bytes)),
             Contains("zip entry 'a': extra field 0x0001 declares 25 bytes but 24 remain"));
}

TEST_CASE("saturated directory fields with no zip64 locator are refused") {
  auto b = build_zip(three_stored());
  put32(b.bytes, b.eocd_at + 16, 0xFFFFFFFF);
  CHECK_THAT(message_of(check(b.bytes)), Contains("but no zip64 locator precedes it"));
}

TEST_CASE("a zip64 locator or record in the wrong place is refused") {
  auto base = build_zip(three_stored(), true);
  SECTION("locator points past itself") {
    auto b = base;
    put64(b.bytes, b.locator_at + 8, b.locator_at - 10);
    CHECK_THAT(message_of(check(b.bytes)), Contains("leaves no room for a zip64 end of central"));
  }
  SECTION("locator points at something else") {
    auto b = base;
    put64(b.bytes, b.locator_at + 8, 0);
    CHECK_THAT(message_of(check(b.bytes)), Contains("holds no zip64 end of central directory"));
  }
  SECTION("record's size runs into the locator") {
    auto b = base;
    put64(b.bytes, b.zip64_at + 4, 45);
    CHECK_THAT(message_of(check(b.bytes)), Contains("declares 45 bytes, which do not fit"));
  }
  SECTION("record's directory offset disagrees with an unsaturated end record field") {
    auto b = base;
    put32(b.bytes, b.eocd_at + 16, 7);
    CHECK_THAT(message_of(check(b.bytes)), Contains("directory offset 7 disagrees"));
  }
  SECTION("record's directory overlaps the record") {
    auto b = base;
    put64(b.bytes, b.zip64_at + 40, b.directory_size + 1);
    CHECK_THAT(message_of(check(b.bytes)), Contains("does not end before the end records"));
  }
}

TEST_CASE("no end of central directory record is refused") {
  CHECK_THAT(message_of(check("")), Contains("shorter than an end of central directory record"));
  CHECK_THAT(message_of(check(std::string(1000, 'x'))),
             Contains("not a zip archive: no end of central directory record"));
  // A record further back than 22 + 65535 bytes from the end is not looked for.
  auto b = build_zip(three_stored());
  CHECK_THAT(message_of(check(b.bytes + std::string(70000, '\0'))),
             Contains("not a zip archive: no end of central directory record"));
}

TEST_CASE("an end record whose comment length disagrees with the end of file is refused") {
  auto b = build_zip(three_stored(), false, "hello");
  SECTION("trailing bytes") {
    CHECK_THAT(message_of(check(b.bytes + "xx")),
               Contains("declares a 5-byte comment but 7 bytes follow it"));
  }
  SECTION("comment length too long") {
    put16(b.bytes, b.eocd_at + 20, 6);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("declares a 6-byte comment but 5 bytes follow it"));
  }
}

TEST_CASE("a central directory outside the file or past the end record is refused") {
  auto b = build_zip(three_stored());
  SECTION("offset past the end") {
    put32(b.bytes, b.eocd_at + 16, 0xFFFFFFF0);
    CHECK_THAT(message_of(check(b.bytes)), Contains("does not end before the end records"));
  }
  SECTION("size runs into the end record") {
    put32(b.bytes, b.eocd_at + 12, b.directory_size + 1);
    CHECK_THAT(message_of(check(b.bytes)), Contains("does not end before the end records"));
  }
  SECTION("over the directory cap") {
    zip_limits limits;
    limits.max_directory_bytes = b.directory_size - 1;
    CHECK_THAT(message_of(check(b.bytes, limits)), Contains("is over the limit of"));
  }
  SECTION("more entries than the size can hold") {
    put16(b.bytes, b.eocd_at + 8, 200);
    put16(b.bytes, b.eocd_at + 10, 200);
    CHECK_THAT(message_of(check(b.bytes)), Contains("cannot hold the 200 entries"));
  }
}

TEST_CASE("an entry count that disagrees with the directory is refused") {
  auto b = build_zip(three_stored());
  SECTION("fewer declared") {
    put16(b.bytes, b.eocd_at + 8, 2);
    put16(b.bytes, b.eocd_at + 10, 2);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("declares 2 entries in " + std::to_string(b.directory_size)));
  }
  SECTION("more declared") {
    put16(b.bytes, b.eocd_at + 8, 4);
    put16(b.bytes, b.eocd_at + 10, 4);
    // 3 real headers leave too little for a 4th of 46 bytes... or the count is not plausible.
    auto msg = message_of(check(b.bytes));
    CHECK((msg.find("cannot hold the 4 entries") != std::string::npos ||
           msg.find("central header runs past") != std::string::npos));
  }
}

TEST_CASE("a bad central header is refused") {
  auto b = build_zip(three_stored());
  SECTION("signature") {
    put32(b.bytes, b.central_at[1], 0x02014b51);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("zip entry 1 (directory offset " + std::to_string(b.central_at[1]) +
                        "): no central header signature"));
  }
  SECTION("name runs past the directory") {
    put16(b.bytes, b.central_at[2] + 28, 200);
    CHECK_THAT(message_of(check(b.bytes)), Contains("run past the end of the central directory"));
  }
}

TEST_CASE("methods other than stored and deflate, encryption and multi-disk are refused") {
  auto b = build_zip(three_stored());
  SECTION("method 12 (bzip2)") {
    put16(b.bytes, b.central_at[0] + 10, 12);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("zip entry 'archive/data.pkl': compression method 12 is not stored"));
  }
  SECTION("encrypted") {
    put16(b.bytes, b.central_at[2] + 8, 1);
    CHECK_THAT(message_of(check(b.bytes)), Contains("zip entry 'archive/version': is encrypted"));
  }
  SECTION("end record on disk 1") {
    put16(b.bytes, b.eocd_at + 4, 1);
    CHECK_THAT(message_of(check(b.bytes)), Contains("multi-disk archives are refused"));
  }
  SECTION("entries on this disk differ from the total") {
    put16(b.bytes, b.eocd_at + 8, 2);
    CHECK_THAT(message_of(check(b.bytes)), Contains("multi-disk archives are refused"));
  }
  SECTION("an entry on disk 2") {
    put16(b.bytes, b.central_at[1] + 34, 2);
    CHECK_THAT(message_of(check(b.bytes)), Contains("starts on disk 2"));
  }
  SECTION("zip64 locator with two disks") {
    auto z = build_zip(three_stored(), true);
    put32(z.bytes, z.locator_at + 16, 2);
    CHECK_THAT(message_of(check(z.bytes)), Contains("multi-disk archives are refused"));
  }
}

TEST_CASE("a stored entry with different sizes is refused") {
  auto b = build_zip({{"a", "abcd", 0, 4, 5, {}}});
  CHECK_THAT(message_of(check(b.bytes)),
             Contains("zip entry 'a': is stored but declares 5 bytes from 4"));
}

TEST_CASE("the ratio: exactly the limit passes, just over is refused") {
  std::string data(3000, 'd');
  CHECK(check(build_zip({{"archive/data/0", data, 8, {}, 300000, {}}}).bytes).has_value());
  CHECK_THAT(message_of(check(build_zip({{"archive/data/0", data, 8, {}, 300001, {}}}).bytes)),
             Contains("zip entry 'archive/data/0': declares 300001 bytes inflated from 3000 "
                      "(ratio over 100)"));
  CHECK_THAT(
      message_of(check(build_zip({{"archive/data/0", data, 8, {}, 4294967296, {}}}, true).bytes)),
      Contains("zip entry 'archive/data/0': declares 4294967296 bytes inflated from 3000 "
               "(ratio over 100)"));
  zip_limits limits;
  limits.max_ratio = 2.5;
  CHECK(check(build_zip({{"a", "ab", 8, {}, 5, {}}}).bytes, limits).has_value());
  CHECK_THAT(message_of(check(build_zip({{"a", "ab", 8, {}, 6, {}}}).bytes, limits)),
             Contains("ratio over 2.5"));
  // Deflate from nothing is always over; nothing from nothing is fine.
  CHECK_THAT(message_of(check(build_zip({{"a", "", 8, {}, 1, {}}}).bytes)),
             Contains("declares 1 bytes inflated from 0"));
}

TEST_CASE("invalid limits are refused") {
  auto b = build_zip(three_stored());
  zip_limits limits;
  limits.max_ratio = std::nan("");
  CHECK_THAT(message_of(check(b.bytes, limits)), Contains("max_ratio"));
  limits.max_ratio = 0.5;
  CHECK_THAT(message_of(check(b.bytes, limits)), Contains("max_ratio"));
}

TEST_CASE("the total: exactly the limit passes, one more byte is refused") {
  auto b = build_zip(three_stored());
  zip_limits limits;
  limits.max_total_bytes = 114;
  CHECK(check(b.bytes, limits).has_value());
  limits.max_total_bytes = 113;
  CHECK_THAT(message_of(check(b.bytes, limits)),
             Contains("zip entry 'archive/version': brings the archive's declared size past the "
                      "limit of 113 bytes (112 before it, 2 in it)"));
}

TEST_CASE("each entry: exactly the limit passes, one more byte is refused") {
  auto b = build_zip(three_stored());
  zip_limits limits;
  limits.max_entry_bytes = 100;
  CHECK(check(b.bytes, limits).has_value());
  limits.max_entry_bytes = 99;
  CHECK_THAT(message_of(check(b.bytes, limits)),
             Contains("zip entry 'archive/data/0': declares 100 bytes, over the limit of 99"));
}

TEST_CASE("the entry count: at the limit passes, one over is refused") {
  auto b = build_zip(three_stored());
  zip_limits limits;
  limits.max_entries = 3;
  CHECK(check(b.bytes, limits).has_value());
  limits.max_entries = 2;
  CHECK_THAT(message_of(check(b.bytes, limits)),
             Contains("zip archive declares 3 entries, over the limit of 2"));
}

TEST_CASE("local headers: offset past the end, bad signature, data past the directory") {
  auto b = build_zip(three_stored());
  SECTION("offset past the end of the file") {
    put32(b.bytes, b.central_at[1] + 42, b.bytes.size() - 29);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("zip entry 'archive/data/0': local header offset " +
                        std::to_string(b.bytes.size() - 29) + " is past the end of the file"));
  }
  SECTION("offset far past the end (zip64)") {
    auto z = build_zip(three_stored(), true);
    put64(z.bytes, z.central_at[0] + 46 + 16 + 4 + 16, 0xFFFFFFFFFFFFFFF0);
    CHECK_THAT(message_of(check(z.bytes)),
               Contains("local header offset 18446744073709551600 is past the end"));
  }
  SECTION("no local signature there") {
    put32(b.bytes, b.central_at[1] + 42, b.local_at[1] + 1);
    CHECK_THAT(message_of(check(b.bytes)),
               Contains("zip entry 'archive/data/0': no local header signature at offset"));
  }
  SECTION("the local extra length pushes the data into the directory") {
    put16(b.bytes, b.local_at[2] + 28, 1);
    CHECK_THAT(
        message_of(check(b.bytes)),
        Contains("zip entry 'archive/version': data of 2 bytes at offset " +
                 std::to_string(b.local_at[2] + 30 + 15 + 1) + " runs into the central directory"));
  }
  SECTION("the local extra length pushes the data past the end of the file") {
    put16(b.bytes, b.local_at[2] + 28, 0xFFFF);
    CHECK_THAT(message_of(check(b.bytes)), Contains("runs past the end of the file"));
  }
  SECTION("a compressed size past the end of the file") {
    auto z = build_zip({{"a", "abc", 8, {}, 10, {}}}, true);
    put64(z.bytes, z.central_at[0] + 46 + 1 + 4 + 8, 0xFFFFFFFFFFFFFFFF);
    CHECK_THAT(message_of(check(z.bytes)),
               Contains("zip entry 'a': data of 18446744073709551615 bytes"));
  }
}

TEST_CASE("local header extra fields (PyTorch's alignment padding) are skipped") {
  auto b = build_zip({{"archive/data/0", std::string(64, 'w'), 0, {}, {}, std::string(40, 'F')}});
  CHECK(check(b.bytes).has_value());
}

TEST_CASE("names in messages are escaped and cut short") {
  auto b = build_zip({{std::string("a\x01'\n", 4) + std::string(300, 'n'), "ab", 0, 2, 3, {}}});
  auto msg = message_of(check(b.bytes));
  CHECK_THAT(msg, Contains("zip entry 'a\\x01\\x27\\x0annn"));
  CHECK_THAT(msg, Contains("nnn...': is stored"));
}

TEST_CASE("every prefix of a small archive is refused without a crash") {
  for (bool zip64 : {false, true}) {
    auto b = build_zip(three_stored(), zip64, "c");
    for (std::size_t n = 0; n < b.bytes.size(); ++n) {
      auto r = check(b.bytes.substr(0, n));
      CHECK_FALSE(r.has_value());
    }
    CHECK(check(b.bytes).has_value());
  }
}

TEST_CASE("every single-byte corruption of the end records and directory is handled") {
  // Not a rule by itself: a sweep for crashes, out-of-range reads (check() REQUIREs every read
  // in bounds) and sanitizer findings.
  for (bool zip64 : {false, true}) {
    auto b = build_zip(three_stored(), zip64);
    for (std::size_t at = b.directory_at; at < b.bytes.size(); ++at) {
      for (int v : {0x00, 0x01, 0x7f, 0xff}) {
        std::string s = b.bytes;
        s[at] = static_cast<char>(v);
        (void)check(s);
      }
    }
  }
}

TEST_CASE("a read error is returned as is") {
  auto b = build_zip(three_stored());
  int reads = 0;
  auto read_at = [&](std::uint64_t offset, std::size_t size) -> warm::expected<std::string> {
    if (++reads == 3) return warm::make_error(warm::errc::load_failed, "disk on fire");
    return b.bytes.substr(offset, size);
  };
  auto r = check_zip(b.bytes.size(), read_at, {});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == warm::errc::load_failed);
  CHECK(r.error().message == "disk on fire");
}

TEST_CASE("a short read (the file shrank) is load_failed") {
  auto b = build_zip(three_stored());
  auto read_at = [&](std::uint64_t offset, std::size_t size) -> warm::expected<std::string> {
    return b.bytes.substr(offset, size > 40 ? size - 1 : size);
  };
  auto r = check_zip(b.bytes.size(), read_at, {});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == warm::errc::load_failed);
  CHECK_THAT(r.error().message, Contains("did the file shrink?"));
}

TEST_CASE("check_zip_fd reads a file with pread and leaves its offset alone") {
  auto b = build_zip(three_stored(), true);
  char path[] = "/tmp/zip_check_test_XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  REQUIRE(::write(fd, b.bytes.data(), b.bytes.size()) == static_cast<ssize_t>(b.bytes.size()));
  REQUIRE(::lseek(fd, 7, SEEK_SET) == 7);
  auto r = warm::check_zip_fd(fd, {});
  REQUIRE(r.has_value());
  CHECK(r->entries == 3);
  CHECK(::lseek(fd, 0, SEEK_CUR) == 7);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(b.bytes.size() - 1)) == 0);
  CHECK_FALSE(warm::check_zip_fd(fd, {}).has_value());
  ::close(fd);

  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  auto p = warm::check_zip_fd(pipe_fds[0], {});
  REQUIRE_FALSE(p.has_value());
  CHECK_THAT(p.error().message, Contains("not a regular file"));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}
