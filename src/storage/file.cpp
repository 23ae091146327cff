#include "storage/file.hpp"

#include "storage/file_arrival.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace warm {
namespace {

error os_error(errc code, const std::string& path, const char* what, int err) {
  return make_error(code, path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

read_file::read_file(int fd, std::uint64_t size, std::string path)
    : fd_(fd), size_(size), path_(std::move(path)) {}

read_file::read_file(read_file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      path_(std::move(other.path_)),
      arrival_(std::move(other.arrival_)),
      epoch_(other.epoch_) {}

read_file& read_file::operator=(read_file&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
    arrival_ = std::move(other.arrival_);
    epoch_ = other.epoch_;
  }
  return *this;
}

read_file::~read_file() {
  if (fd_ >= 0) ::close(fd_);
}

expected<read_file> read_file::open(const std::string& path) {
  // O_NONBLOCK so that opening a FIFO cannot block; it has no effect on regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    return os_error(err == ENOENT || err == ENOTDIR ? errc::not_found : errc::load_failed, path,
                    "cannot open", err);
  }
  return adopt(fd, path);
}

expected<read_file> read_file::adopt(int fd, std::string path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return os_error(errc::load_failed, path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(errc::invalid_argument, path + ": not a regular file");
  }
  return read_file(fd, static_cast<std::uint64_t>(st.st_size), std::move(path));
}

expected<read_file> read_file::arriving(std::shared_ptr<const file_arrival> arrival) {
  const auto epoch = arrival->epoch();
  auto fd = arrival->open_descriptor();
  if (!fd) return std::move(fd).error();
  read_file out(*fd, arrival->size(), arrival->name());
  out.arrival_ = std::move(arrival);
  out.epoch_ = epoch;
  return out;
}

expected<void> read_file::read_exactly(void* out, std::size_t bytes, std::uint64_t offset) const {
  if (arrival_) {
    if (offset + bytes > size_)
      return make_error(errc::load_failed, path_ + ": a read past the end of the object");
    if (auto r = arrival_->wait_for(offset + bytes, epoch_); !r) return r;
  }
  auto* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    // Linux caps one read at about 2 GiB; ask for at most 1 GiB at a time.
    std::size_t ask = bytes < (std::size_t{1} << 30) ? bytes : (std::size_t{1} << 30);
    ssize_t got = ::pread(fd_, cursor, ask, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return os_error(errc::load_failed, path_, "read failed", errno);
    }
    if (got == 0)
      return make_error(errc::load_failed, path_ + ": unexpected end of file (was it truncated?)");
    cursor += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return {};
}

expected<std::uint64_t> read_file::current_size() const {
  if (arrival_) return size_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return os_error(errc::load_failed, path_, "cannot stat", errno);
  return static_cast<std::uint64_t>(st.st_size);
}

expected<file_identity> read_file::identity() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return os_error(errc::load_failed, path_, "cannot stat", errno);
  return file_identity{
      static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
      static_cast<std::uint64_t>(st.st_size),
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

void read_file::advise_sequential() const {
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

}  // namespace warm
