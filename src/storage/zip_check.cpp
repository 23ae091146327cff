#include "storage/zip_check.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

namespace warm {
namespace {

// Signatures and fixed sizes (APPNOTE.TXT 4.3).
constexpr std::uint32_t local_signature = 0x04034b50;
constexpr std::uint32_t central_signature = 0x02014b50;
constexpr std::uint32_t eocd_signature = 0x06054b50;
constexpr std::uint32_t zip64_eocd_signature = 0x06064b50;
constexpr std::uint32_t zip64_locator_signature = 0x07064b50;
constexpr std::uint64_t local_size = 30;
constexpr std::uint64_t central_size = 46;
constexpr std::uint64_t eocd_size = 22;
constexpr std::uint64_t max_eocd_search = eocd_size + 0xFFFF;  // 65557: the record + a comment
constexpr std::uint64_t zip64_locator_size = 20;
constexpr std::uint64_t zip64_eocd_size = 56;
constexpr std::uint16_t zip64_extra_id = 0x0001;
constexpr std::uint16_t saturated16 = 0xFFFF;
constexpr std::uint32_t saturated32 = 0xFFFFFFFF;
constexpr std::uint16_t method_stored = 0;
constexpr std::uint16_t method_deflate = 8;
// Longest entry name quoted in a message.
constexpr std::size_t max_quoted_name = 200;

std::uint16_t get16(std::string_view s, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(s[at]) |
                                    static_cast<unsigned char>(s[at + 1]) << 8);
}
std::uint32_t get32(std::string_view s, std::size_t at) {
  return static_cast<std::uint32_t>(get16(s, at)) | static_cast<std::uint32_t>(get16(s, at + 2))
                                                        << 16;
}
std::uint64_t get64(std::string_view s, std::size_t at) {
  return static_cast<std::uint64_t>(get32(s, at)) | static_cast<std::uint64_t>(get32(s, at + 4))
                                                        << 32;
}

std::string num(std::uint64_t n) {
  return std::to_string(n);
}

std::string hex16(std::uint16_t n) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", n);
  return buf;
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", r);
  return buf;
}

// An entry's name as quoted in messages: printable ASCII as is, other bytes as \xNN, cut short.
std::string quote_name(std::string_view name) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < name.size() && i < max_quoted_name; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  if (name.size() > max_quoted_name) out += "...";
  return out + "'";
}

// Reads exactly `size` bytes at `offset` (the caller has checked they lie inside the file).
expected<std::string> read_exact(const zip_read_at& read_at, std::uint64_t offset,
                                 std::size_t size) {
  auto got = read_at(offset, size);
  if (!got) return std::move(got).error();
  if (got->size() < size) {
    return make_error(errc::load_failed, "zip archive read " + num(got->size()) + " of " +
                                             num(size) + " bytes at offset " + num(offset) +
                                             " (did the file shrink?)");
  }
  got->resize(size);
  return got;
}

// Where the central directory is, as the end records declare it.
struct directory_location {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t end_limit = 0;  // the directory must end at or before this (the first end record)
  bool zip64 = false;
};

// The end of central directory record's fields (APPNOTE 4.3.16).
struct eocd_fields {
  std::uint64_t position = 0;
  std::uint16_t disk = 0, directory_disk = 0, entries_on_disk = 0, entries = 0;
  std::uint32_t directory_size = 0, directory_offset = 0;
};

// Finds the end of central directory record: the last signature, scanning back over at most
// 65557 bytes, whose comment ends exactly at the end of the file.
expected<eocd_fields> find_eocd(std::uint64_t file_size, const zip_read_at& read_at) {
  if (file_size < eocd_size) {
    return invalid_input("not a zip archive: " + num(file_size) +
                         " bytes is shorter than an end of central directory record (22)");
  }
  std::uint64_t tail_size = file_size < max_eocd_search ? file_size : max_eocd_search;
  std::uint64_t tail_start = file_size - tail_size;
  auto tail = read_exact(read_at, tail_start, static_cast<std::size_t>(tail_size));
  if (!tail) return std::move(tail).error();
  std::string_view t = *tail;
  bool mismatch_seen = false;
  std::uint64_t mismatch_at = 0, mismatch_comment = 0;
  for (std::uint64_t p = tail_size - eocd_size + 1; p-- > 0;) {
    if (get32(t, p) != eocd_signature) continue;
    std::uint64_t comment = get16(t, p + 20);
    std::uint64_t follows = tail_size - p - eocd_size;
    if (comment == follows) {
      eocd_fields f;
      f.position = tail_start + p;
      f.disk = get16(t, p + 4);
      f.directory_disk = get16(t, p + 6);
      f.entries_on_disk = get16(t, p + 8);
      f.entries = get16(t, p + 10);
      f.directory_size = get32(t, p + 12);
      f.directory_offset = get32(t, p + 16);
      return f;
    }
    if (!mismatch_seen) {
      mismatch_seen = true;
      mismatch_at = tail_start + p;
      mismatch_comment = comment;
    }
  }
  if (mismatch_seen) {
    return invalid_input("zip end of central directory record at offset " + num(mismatch_at) +
                         " declares a " + num(mismatch_comment) + "-byte comment but " +
                         num(file_size - mismatch_at - eocd_size) +
                         " bytes follow it to the end of the file");
  }
  return invalid_input("not a zip archive: no end of central directory record");
}

// A 32-bit end-record field extended by zip64: saturated, or equal to the zip64 value.
expected<void> agrees(const char* what, std::uint64_t narrow, std::uint64_t saturated,
                      std::uint64_t wide) {
  if (narrow == saturated || narrow == wide) return {};
  return invalid_input("zip end of central directory record's " + std::string(what) + " " +
                       num(narrow) + " disagrees with the zip64 record's " + num(wide));
}

// Reads the zip64 locator and record that precede the record at `e.position` (the locator is
// there: checked by the caller).
expected<directory_location> read_zip64(const eocd_fields& e, std::string_view locator,
                                        const zip_read_at& read_at) {
  std::uint64_t locator_at = e.position - zip64_locator_size;
  std::uint32_t record_disk = get32(locator, 4);
  std::uint64_t record_at = get64(locator, 8);
  std::uint32_t disks = get32(locator, 16);
  if (record_disk != 0 || disks > 1) {
    return invalid_input("zip archive spans several disks (zip64 locator: record on disk " +
                         num(record_disk) + ", " + num(disks) +
                         " disks); multi-disk archives are "
                         "refused");
  }
  if (record_at > locator_at || locator_at - record_at < zip64_eocd_size) {
    return invalid_input(
        "zip64 locator points at offset " + num(record_at) +
        ", which leaves no room for a zip64 end of central directory record before "
        "the locator at " +
        num(locator_at));
  }
  auto record = read_exact(read_at, record_at, zip64_eocd_size);
  if (!record) return std::move(record).error();
  std::string_view r = *record;
  if (get32(r, 0) != zip64_eocd_signature) {
    return invalid_input("zip64 locator points at offset " + num(record_at) +
                         ", which holds no zip64 end of central directory record");
  }
  std::uint64_t rest = get64(r, 4);  // the record's size after its first 12 bytes
  if (rest < zip64_eocd_size - 12 || rest > locator_at - record_at - 12) {
    return invalid_input("zip64 end of central directory record at offset " + num(record_at) +
                         " declares " + num(rest) +
                         " bytes, which do not fit between 44 and the "
                         "locator at " +
                         num(locator_at));
  }
  std::uint32_t disk = get32(r, 16), directory_disk = get32(r, 20);
  std::uint64_t entries_on_disk = get64(r, 24), entries = get64(r, 32);
  std::uint64_t size = get64(r, 40), offset = get64(r, 48);
  if (disk != 0 || directory_disk != 0 || entries_on_disk != entries) {
    return invalid_input("zip archive spans several disks (zip64 record: disk " + num(disk) +
                         ", directory on disk " + num(directory_disk) + ", " +
                         num(entries_on_disk) + " of " + num(entries) +
                         " entries on this disk); multi-disk archives are "
                         "refused");
  }
  if (auto ok = agrees("entry count", e.entries, saturated16, entries); !ok) return ok.error();
  if (auto ok = agrees("entry count on this disk", e.entries_on_disk, saturated16, entries); !ok) {
    return ok.error();
  }
  if (auto ok = agrees("directory size", e.directory_size, saturated32, size); !ok) {
    return ok.error();
  }
  if (auto ok = agrees("directory offset", e.directory_offset, saturated32, offset); !ok) {
    return ok.error();
  }
  if ((e.disk != 0 && e.disk != saturated16) ||
      (e.directory_disk != 0 && e.directory_disk != saturated16)) {
    return invalid_input("zip archive spans several disks (end record: disk " + num(e.disk) +
                         ", directory on disk " + num(e.directory_disk) +
                         "); multi-disk archives are refused");
  }
  directory_location loc;
  loc.entries = entries;
  loc.offset = offset;
  loc.size = size;
  loc.end_limit = record_at;
  loc.zip64 = true;
  return loc;
}

// Where the central directory is: from the end record, or from the zip64 record when a zip64
// locator precedes the end record (as libtorch's miniz reads it).
expected<directory_location> locate_directory(std::uint64_t file_size, const zip_read_at& read_at) {
  auto found = find_eocd(file_size, read_at);
  if (!found) return std::move(found).error();
  const eocd_fields& e = *found;
  if (e.position >= zip64_locator_size) {
    auto locator = read_exact(read_at, e.position - zip64_locator_size, zip64_locator_size);
    if (!locator) return std::move(locator).error();
    if (get32(*locator, 0) == zip64_locator_signature) return read_zip64(e, *locator, read_at);
  }
  if (e.directory_size == saturated32 || e.directory_offset == saturated32) {
    return invalid_input(
        "zip end of central directory record declares zip64 values (directory size " +
        num(e.directory_size) + ", offset " + num(e.directory_offset) +
        ") but no zip64 locator precedes it");
  }
  if (e.disk != 0 || e.directory_disk != 0 || e.entries_on_disk != e.entries) {
    return invalid_input("zip archive spans several disks (disk " + num(e.disk) +
                         ", directory on disk " + num(e.directory_disk) + ", " +
                         num(e.entries_on_disk) + " of " + num(e.entries) +
                         " entries on this disk); multi-disk archives are refused");
  }
  directory_location loc;
  loc.entries = e.entries;  // 0xFFFF is a real count when there is no zip64 record
  loc.offset = e.directory_offset;
  loc.size = e.directory_size;
  loc.end_limit = e.position;
  return loc;
}

// One central directory entry's fields, after the zip64 extra field has been applied.
struct central_entry {
  std::string name;  // quoted, for messages
  std::uint16_t flags = 0, method = 0;
  std::uint64_t compressed = 0, uncompressed = 0, local_offset = 0, disk = 0;
};

// Applies the zip64 extended information extra field of `extra` to the saturated fields of `c`,
// in the spec's order (uncompressed, compressed, local header offset, disk).
expected<void> apply_zip64_extra(std::string_view extra, central_entry& c) {
  bool need_unc = c.uncompressed == saturated32, need_comp = c.compressed == saturated32;
  bool need_off = c.local_offset == saturated32, need_disk = c.disk == saturated16;
  bool found = false;
  std::string_view data;
  std::size_t at = 0;
  while (at < extra.size()) {
    if (extra.size() - at < 4) {
      return invalid_input("zip entry " + c.name + ": extra field ends in " +
                           num(extra.size() - at) + " stray bytes");
    }
    std::uint16_t id = get16(extra, at), size = get16(extra, at + 2);
    if (size > extra.size() - at - 4) {
      return invalid_input("zip entry " + c.name + ": extra field " + hex16(id) + " declares " +
                           num(size) + " bytes but " + num(extra.size() - at - 4) + " remain");
    }
    if (id == zip64_extra_id && !found) {
      found = true;
      data = extra.substr(at + 4, size);
    }
    at += 4 + std::size_t{size};
  }
  if (!need_unc && !need_comp && !need_off && !need_disk) return {};
  if (!found) {
    return invalid_input("zip entry " + c.name +
                         ": declares 0xFFFFFFFF sizes or offset but has no zip64 extra field");
  }
  std::size_t pos = 0;
  auto take = [&](const char* what, std::size_t width, std::uint64_t& field) -> expected<void> {
    if (data.size() - pos < width) {
      return invalid_input("zip entry " + c.name + ": zip64 extra field (" + num(data.size()) +
                           " bytes) lacks the " + what);
    }
    field = width == 8 ? get64(data, pos) : get32(data, pos);
    pos += width;
    return {};
  };
  if (need_unc) {
    if (auto ok = take("uncompressed size", 8, c.uncompressed); !ok) return ok;
  }
  if (need_comp) {
    if (auto ok = take("compressed size", 8, c.compressed); !ok) return ok;
  }
  if (need_off) {
    if (auto ok = take("local header offset", 8, c.local_offset); !ok) return ok;
  }
  if (need_disk) {
    if (auto ok = take("disk number", 4, c.disk); !ok) return ok;
  }
  return {};
}

// Whether uncompressed/compressed exceeds `max_ratio` (>= 1), exactly for integer ratios and
// without overflow: compares the quotient first, then the remainder.
bool over_ratio(std::uint64_t uncompressed, std::uint64_t compressed, double max_ratio) {
  if (compressed == 0) return uncompressed > 0;
  if (max_ratio >= 18446744073709551616.0) return false;  // 2^64: no size can exceed it
  auto whole = static_cast<std::uint64_t>(std::floor(max_ratio));
  double fraction = max_ratio - std::floor(max_ratio);
  std::uint64_t q = uncompressed / compressed, r = uncompressed % compressed;
  if (q != whole) return q > whole;
  return static_cast<long double>(r) > static_cast<long double>(fraction) * compressed;
}

// The checks of one entry's method, flags and sizes against the limits; adds it to `summary`.
expected<void> check_sizes(const central_entry& c, const zip_limits& limits, zip_summary& summary) {
  if (c.flags & 1u) return invalid_input("zip entry " + c.name + ": is encrypted");
  if (c.method != method_stored && c.method != method_deflate) {
    return invalid_input("zip entry " + c.name + ": compression method " + num(c.method) +
                         " is not stored (0) or deflate (8)");
  }
  if (c.disk != 0) {
    return invalid_input("zip entry " + c.name + ": starts on disk " + num(c.disk) +
                         "; multi-disk archives are refused");
  }
  if (c.method == method_stored && c.compressed != c.uncompressed) {
    return invalid_input("zip entry " + c.name + ": is stored but declares " + num(c.uncompressed) +
                         " bytes from " + num(c.compressed));
  }
  if (c.method == method_deflate && over_ratio(c.uncompressed, c.compressed, limits.max_ratio)) {
    return invalid_input("zip entry " + c.name + ": declares " + num(c.uncompressed) +
                         " bytes inflated from " + num(c.compressed) + " (ratio over " +
                         ratio_text(limits.max_ratio) + ")");
  }
  if (c.uncompressed > limits.max_entry_bytes) {
    return invalid_input("zip entry " + c.name + ": declares " + num(c.uncompressed) +
                         " bytes, over the limit of " + num(limits.max_entry_bytes) + " per entry");
  }
  if (c.uncompressed > limits.max_total_bytes - summary.total_bytes) {
    return invalid_input("zip entry " + c.name +
                         ": brings the archive's declared size past the limit "
                         "of " +
                         num(limits.max_total_bytes) + " bytes (" + num(summary.total_bytes) +
                         " before it, " + num(c.uncompressed) + " in it)");
  }
  summary.total_bytes += c.uncompressed;
  if (c.uncompressed > summary.largest_entry) summary.largest_entry = c.uncompressed;
  if (c.method == method_deflate) summary.compressed = true;
  return {};
}

// The local header at the entry's offset: inside the file, its signature, and its data (after
// the local name and extra) ending at or before the central directory.
expected<void> check_local(const central_entry& c, std::uint64_t file_size,
                           std::uint64_t directory_offset, const zip_read_at& read_at) {
  if (c.local_offset > file_size || file_size - c.local_offset < local_size) {
    return invalid_input("zip entry " + c.name + ": local header offset " + num(c.local_offset) +
                         " is past the end of the file (" + num(file_size) + " bytes)");
  }
  auto header = read_exact(read_at, c.local_offset, local_size);
  if (!header) return std::move(header).error();
  if (get32(*header, 0) != local_signature) {
    return invalid_input("zip entry " + c.name + ": no local header signature at offset " +
                         num(c.local_offset));
  }
  std::uint64_t data_start =
      c.local_offset + local_size + get16(*header, 26) + get16(*header, 28);  // < 2^64: small
  if (data_start > file_size || c.compressed > file_size - data_start) {
    return invalid_input("zip entry " + c.name + ": data of " + num(c.compressed) +
                         " bytes at offset " + num(data_start) +
                         " runs past the end of the file (" + num(file_size) + " bytes)");
  }
  if (data_start + c.compressed > directory_offset) {
    return invalid_input("zip entry " + c.name + ": data of " + num(c.compressed) +
                         " bytes at offset " + num(data_start) +
                         " runs into the central directory at offset " + num(directory_offset));
  }
  return {};
}

}  // namespace

expected<zip_summary> check_zip(std::uint64_t file_size, const zip_read_at& read_at,
                                const zip_limits& limits) {
  if (!(limits.max_ratio >= 1.0)) {
    return invalid_input("zip limits: max_ratio " + ratio_text(limits.max_ratio) +
                         " is not a number >= 1");
  }
  auto located = locate_directory(file_size, read_at);
  if (!located) return std::move(located).error();
  const directory_location& d = *located;

  if (d.entries > limits.max_entries) {
    return invalid_input("zip archive declares " + num(d.entries) + " entries, over the limit of " +
                         num(limits.max_entries));
  }
  if (d.offset > d.end_limit || d.size > d.end_limit - d.offset) {
    return invalid_input("zip central directory of " + num(d.size) + " bytes at offset " +
                         num(d.offset) + " does not end before the end records at offset " +
                         num(d.end_limit));
  }
  if (d.size > limits.max_directory_bytes) {
    return invalid_input("zip central directory of " + num(d.size) +
                         " bytes is over the limit of " + num(limits.max_directory_bytes));
  }
  if (d.entries > d.size / central_size) {
    return invalid_input("zip central directory of " + num(d.size) + " bytes cannot hold the " +
                         num(d.entries) + " entries it declares");
  }
  auto directory = read_exact(read_at, d.offset, static_cast<std::size_t>(d.size));
  if (!directory) return std::move(directory).error();
  std::string_view dir = *directory;

  zip_summary summary;
  summary.entries = d.entries;
  summary.zip64 = d.zip64;
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < d.entries; ++i) {
    auto where = [&] {
      return "zip entry " + num(i) + " (directory offset " + num(d.offset + at) + ")";
    };
    if (dir.size() - at < central_size) {
      return invalid_input(where() + ": central header runs past the end of the central directory");
    }
    if (get32(dir, at) != central_signature) {
      return invalid_input(where() + ": no central header signature");
    }
    std::size_t name_len = get16(dir, at + 28), extra_len = get16(dir, at + 30),
                comment_len = get16(dir, at + 32);
    if (name_len + extra_len + comment_len > dir.size() - at - central_size) {
      return invalid_input(where() + ": name, extra field and comment (" +
                           num(name_len + extra_len + comment_len) +
                           " bytes) run past the end of the central directory");
    }
    central_entry c;
    c.name = quote_name(dir.substr(at + central_size, name_len));
    c.flags = get16(dir, at + 8);
    c.method = get16(dir, at + 10);
    c.compressed = get32(dir, at + 20);
    c.uncompressed = get32(dir, at + 24);
    c.disk = get16(dir, at + 34);
    c.local_offset = get32(dir, at + 42);
    if (auto ok = apply_zip64_extra(dir.substr(at + central_size + name_len, extra_len), c); !ok) {
      return ok.error();
    }
    if (auto ok = check_sizes(c, limits, summary); !ok) return ok.error();
    if (auto ok = check_local(c, file_size, d.offset, read_at); !ok) return ok.error();
    at += central_size + name_len + extra_len + comment_len;
  }
  if (at != dir.size()) {
    return invalid_input("zip central directory declares " + num(d.entries) + " entries in " +
                         num(d.size) + " bytes, but they take " + num(at));
  }
  return summary;
}

expected<zip_summary> check_zip_fd(int fd, const zip_limits& limits) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return make_error(errc::load_failed,
                      std::string("zip archive: fstat failed: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return invalid_input("zip archive: not a regular file");
  auto read_at = [fd](std::uint64_t offset, std::size_t size) -> expected<std::string> {
    std::string out(size, '\0');
    std::size_t done = 0;
    while (done < size) {
      ssize_t got = ::pread(fd, &out[done], size - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        return make_error(errc::load_failed, "zip archive: read of " + num(size) +
                                                 " bytes at offset " + num(offset) +
                                                 " failed: " + std::strerror(errno));
      }
      if (got == 0) break;  // end of file: fewer bytes
      done += static_cast<std::size_t>(got);
    }
    out.resize(done);
    return out;
  };
  return check_zip(static_cast<std::uint64_t>(st.st_size), read_at, limits);
}

}  // namespace warm
