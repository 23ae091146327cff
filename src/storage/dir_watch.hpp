// Change notification for served models' directories (inotify): a change in a watched model
// directory, or in one of its version directories, wakes the version manager at once instead of
// at its next poll. Polling stays the ground truth: notification only hurries a look. Where
// inotify is not available (no instances left, or a network file system that sends no events)
// nothing is reported and the poll finds every change, later.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "warm/error.hpp"

namespace warm {

class dir_watch {
 public:
  // Starts the watching thread; `changed(key)` runs on it for every batch of events in the
  // directories watched for `key`. unavailable when inotify cannot be set up.
  static expected<std::unique_ptr<dir_watch>> start(
      std::function<void(const std::string& key)> changed);
  ~dir_watch();  // stops the thread and closes every watch
  dir_watch(const dir_watch&) = delete;
  dir_watch& operator=(const dir_watch&) = delete;

  // Watches directory `dir` for `key`, and each of its subdirectories (its versions; new ones are
  // added as they appear). Replaces what `key` watched when `dir` differs. Thread-safe; blocks on
  // the file system (call it off actor threads). Returns false when `dir` cannot be watched.
  bool watch(const std::string& key, const std::string& dir);
  // Stops watching for `key`. Thread-safe.
  void unwatch(const std::string& key);

 private:
  dir_watch(int inotify_fd, int wake_fd, std::function<void(const std::string&)> changed);
  void run();
  void add_children(const std::string& key, const std::string& dir);  // with mutex_ held
  void drop(const std::string& key);                                  // with mutex_ held

  int inotify_fd_, wake_fd_;
  std::function<void(const std::string&)> changed_;
  std::mutex mutex_;
  std::map<int, std::string> keys_;               // watch descriptor → key
  std::map<std::string, std::string> dirs_;       // key → its directory
  std::map<std::string, int> base_;               // key → its directory's own watch descriptor
  std::map<std::string, std::set<int>> watches_;  // key → its watch descriptors
  std::thread thread_;
};

}  // namespace warm
