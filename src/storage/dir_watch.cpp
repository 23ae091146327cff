#include "storage/dir_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace warm {

namespace {

// What counts as a change: entries appearing, disappearing or renamed, and files finished.
constexpr std::uint32_t events = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM |
                                 IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;

}  // namespace

expected<std::unique_ptr<dir_watch>> dir_watch::start(
    std::function<void(const std::string&)> changed) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return make_error(errc::unavailable, std::string("inotify: ") + std::strerror(errno));
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    ::close(fd);
    return make_error(errc::unavailable, std::string("eventfd: ") + std::strerror(errno));
  }
  std::unique_ptr<dir_watch> w(new dir_watch(fd, wake, std::move(changed)));
  w->thread_ = std::thread([raw = w.get()] { raw->run(); });
  return w;
}

dir_watch::dir_watch(int inotify_fd, int wake_fd, std::function<void(const std::string&)> changed)
    : inotify_fd_(inotify_fd), wake_fd_(wake_fd), changed_(std::move(changed)) {}

dir_watch::~dir_watch() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(inotify_fd_);  // closes every watch with it
  ::close(wake_fd_);
}

void dir_watch::add_children(const std::string& key, const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    int wd = ::inotify_add_watch(inotify_fd_, it->path().c_str(), events | IN_ONLYDIR);
    if (wd < 0) continue;
    keys_[wd] = key;
    watches_[key].insert(wd);
  }
}

void dir_watch::drop(const std::string& key) {
  for (int wd : watches_[key]) {
    // A descriptor another key also uses (two served models on one directory) stays.
    bool shared = false;
    for (auto& [other, wds] : watches_)
      if (other != key && wds.count(wd)) shared = true;
    if (!shared) {
      ::inotify_rm_watch(inotify_fd_, wd);
      keys_.erase(wd);
    }
  }
  watches_.erase(key);
  dirs_.erase(key);
  base_.erase(key);
}

bool dir_watch::watch(const std::string& key, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = dirs_.find(key); it != dirs_.end() && it->second == dir) {
    add_children(key, dir);  // versions that appeared since (watching one again is harmless)
    return true;
  }
  drop(key);
  int wd = ::inotify_add_watch(inotify_fd_, dir.c_str(), events | IN_ONLYDIR);
  if (wd < 0) return false;
  keys_[wd] = key;
  watches_[key].insert(wd);
  dirs_[key] = dir;
  base_[key] = wd;
  add_children(key, dir);
  return true;
}

void dir_watch::unwatch(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  drop(key);
}

void dir_watch::run() {
  alignas(inotify_event) char buffer[16 * 1024];
  while (true) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    std::set<std::string> touched;
    while (true) {
      auto n = ::read(inotify_fd_, buffer, sizeof buffer);
      if (n <= 0) break;
      std::lock_guard<std::mutex> lock(mutex_);
      for (char* p = buffer; p < buffer + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {  // events were lost: every key looks
          for (auto& [key, dir] : dirs_)
            touched.insert(key);
          continue;
        }
        auto it = keys_.find(ev->wd);
        if (it == keys_.end()) continue;
        auto key = it->second;
        touched.insert(key);
        if (ev->mask & IN_IGNORED) {  // the directory went: its descriptor is gone
          watches_[key].erase(ev->wd);
          keys_.erase(it);
          continue;
        }
        // A version directory created or moved into a watched model directory: watch it too.
        if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && ev->len > 0 &&
            base_.count(key) && base_[key] == ev->wd) {
          auto d = dirs_.find(key);
          if (d != dirs_.end()) {
            auto child = d->second + "/" + ev->name;
            int wd = ::inotify_add_watch(inotify_fd_, child.c_str(), events | IN_ONLYDIR);
            if (wd >= 0) {
              keys_[wd] = key;
              watches_[key].insert(wd);
            }
          }
        }
      }
    }
    for (auto& key : touched)
      changed_(key);
  }
}

}  // namespace warm
