// A read-only file handle for model files: RAII over a POSIX descriptor, positional reads that
// retry short reads and EINTR, and a refusal to open anything but a regular file (a FIFO or a
// device node would block or never end).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "warm/error.hpp"

namespace warm {

class file_arrival;

// Which file, in which version: device and inode, size and modification time (nanoseconds). A
// file rewritten in place or replaced by another gets a different identity (short of a writer
// that keeps the size and sets the old mtime back).
struct file_identity {
  std::uint64_t device = 0, inode = 0, size = 0;
  std::int64_t mtime_ns = 0;

  bool operator==(const file_identity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const file_identity& o) const { return !(*this == o); }
};

// A file as one look found it: there with an identity, or not there (or not openable). Two
// looks that differ mean the file changed in between.
struct file_seen {
  bool present = false;
  file_identity identity;  // when present

  bool operator==(const file_seen& o) const {
    return present == o.present && (!present || identity == o.identity);
  }
  bool operator!=(const file_seen& o) const { return !(*this == o); }
};

class read_file {
 public:
  // Opens `path` for reading. not_found when it does not exist, invalid_argument when it is not
  // a regular file, load_failed for other OS errors. Messages name the path.
  static expected<read_file> open(const std::string& path);

  // Takes ownership of `fd`, a descriptor open for reading, and checks it is a regular file (it
  // is closed on error). `path` names it in messages.
  static expected<read_file> adopt(int fd, std::string path);

  // A file still arriving (storage/file_arrival.hpp), read through a descriptor of its own: its
  // size is the whole object's, and each read first waits for its bytes. A read whose bytes
  // cannot come (the fetch failed, or the object was replaced since this was opened) is
  // load_failed. Waits until the writer has created the file.
  static expected<read_file> arriving(std::shared_ptr<const file_arrival> arrival);

  read_file(read_file&& other) noexcept;
  read_file& operator=(read_file&& other) noexcept;
  read_file(const read_file&) = delete;
  read_file& operator=(const read_file&) = delete;
  ~read_file();

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }  // when opened

  // The file's size now (a writer may have changed it since it was opened); an arriving file's is
  // the object's.
  expected<std::uint64_t> current_size() const;
  int descriptor() const { return fd_; }
  // The open file's identity now (fstat); load_failed when it cannot be had.
  expected<file_identity> identity() const;

  // Reads exactly `bytes` at `offset` into `out`. A read past the end of the file (the file
  // shrank) or an I/O error is load_failed. An arriving file's read waits for its bytes.
  expected<void> read_exactly(void* out, std::size_t bytes, std::uint64_t offset) const;

  // The epoch of its arrival this file was opened in (0 for a file at rest).
  std::uint64_t arrival_epoch() const { return epoch_; }

  // Tells the kernel the file will be read sequentially from start to end (readahead).
  void advise_sequential() const;

 private:
  read_file(int fd, std::uint64_t size, std::string path);

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string path_;
  std::shared_ptr<const file_arrival> arrival_;
  std::uint64_t epoch_ = 0;
};

}  // namespace warm
