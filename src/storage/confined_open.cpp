#include "storage/confined_open.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace warm {
namespace {

// Closes a descriptor when it goes out of scope, unless released.
class fd_guard {
 public:
  explicit fd_guard(int fd = -1) : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

error escapes(const std::string& display) {
  return make_error(errc::invalid_argument,
                    display +
                        ": leads outside the repository root (a symlink or '..' in the path; "
                        "did the repository change since the model was registered?)");
}

error os_failure(const std::string& display, int err) {
  if (err == ENOENT || err == ENOTDIR)
    return make_error(errc::not_found, display + ": no such file");
  return make_error(errc::load_failed, display + ": cannot open: " + std::strerror(err));
}

// openat2 with RESOLVE_BENEATH; -1 with errno set on failure (ENOSYS: the kernel lacks it).
int openat2_beneath(int root_fd, const std::string& relative) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root_fd, relative.c_str(), &how, sizeof how));
}

// Opens each component with O_NOFOLLOW; -1 with errno set on failure (ELOOP for a symlink).
int walk_components(int root_fd, const std::string& relative) {
  fd_guard dir(::dup(root_fd));
  if (dir.get() < 0) return -1;
  std::size_t start = 0;
  for (;;) {
    auto slash = relative.find('/', start);
    auto name =
        relative.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (name.empty() || name == "." || name == "..") {
      errno = EXDEV;
      return -1;
    }
    if (slash == std::string::npos)
      return ::openat(dir.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int next = ::openat(dir.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      // A symlink opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR: tell it apart.
      int err = errno;
      struct stat st {};
      if (err == ENOTDIR && ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode))
        err = ELOOP;
      errno = err;
      return -1;
    }
    dir.reset(next);
    start = slash + 1;
  }
}

}  // namespace

expected<read_file> open_beneath(int root_fd, const std::string& relative,
                                 const std::string& display, beneath_walk walk) {
  if (relative.empty() || relative.front() == '/') return escapes(display);
  fd_guard handle(-1);
  bool walked = walk == beneath_walk::components;
  if (!walked) {
    handle.reset(openat2_beneath(root_fd, relative));
    if (handle.get() < 0 && errno == ENOSYS && walk == beneath_walk::automatic) walked = true;
  }
  if (walked) handle.reset(walk_components(root_fd, relative));
  if (handle.get() < 0) {
    int err = errno;
    if (err == EXDEV || err == ELOOP) return escapes(display);
    return os_failure(display, err);
  }

  struct stat st {};
  if (::fstat(handle.get(), &st) != 0) return os_failure(display, errno);
  if (S_ISLNK(st.st_mode)) return escapes(display);  // the component walk's last step
  if (!S_ISREG(st.st_mode))
    return make_error(errc::invalid_argument, display + ": not a regular file");

  // Reopen the very inode checked above for reading (the O_PATH descriptor cannot read).
  auto proc = "/proc/self/fd/" + std::to_string(handle.get());
  int fd = ::open(proc.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return make_error(errc::load_failed,
                      display + ": cannot reopen through /proc: " + std::strerror(errno));
  struct stat reopened {};
  if (::fstat(fd, &reopened) != 0 || reopened.st_dev != st.st_dev || reopened.st_ino != st.st_ino) {
    ::close(fd);
    return make_error(errc::load_failed, display + ": the file changed while it was opened");
  }
  return read_file::adopt(fd, display);
}

}  // namespace warm
