#include "storage/file_arrival.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warm {

file_arrival::file_arrival(std::uint64_t size, std::string name)
    : size_(size), name_(std::move(name)) {}

file_arrival::~file_arrival() {
  if (fd_ >= 0) ::close(fd_);
}

void file_arrival::give_file(int fd) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  changed_.notify_all();
}

void file_arrival::arrived(std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0) return;
  bool grew = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto end = offset + bytes;
    if (offset > prefix_) {
      // An island: merged with the one it extends (a range's bytes come in order), else new.
      auto it = islands_.upper_bound(offset);
      if (it != islands_.begin()) {
        auto before = std::prev(it);
        if (before->second >= offset) {
          if (end > before->second) before->second = end;
          return;
        }
      }
      islands_.emplace(offset, end);
      return;
    }
    if (end <= prefix_) return;
    prefix_ = end;
    // Islands the prefix now reaches join it.
    for (auto it = islands_.begin(); it != islands_.end() && it->first <= prefix_;
         it = islands_.erase(it))
      if (it->second > prefix_) prefix_ = it->second;
    // Readers are woken only once the prefix reaches what one of them waits for: a fetch calls
    // this for every few KiB, a reader wants megabytes at a time.
    if (prefix_ >= wanted_) {
      wanted_ = no_one_waits;
      grew = true;
    }
  }
  if (grew) changed_.notify_all();
}

void file_arrival::restart() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++epoch_;
    prefix_ = 0;
    islands_.clear();
  }
  changed_.notify_all();
}

void file_arrival::finish(expected<void> outcome) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (outcome_) return;
    if (outcome && prefix_ < size_)
      outcome = make_error(errc::internal, name_ + ": the fetch ended with " +
                                               std::to_string(size_ - prefix_) + " bytes missing");
    outcome_ = std::move(outcome);
  }
  changed_.notify_all();
}

std::uint64_t file_arrival::epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return epoch_;
}

std::uint64_t file_arrival::contiguous() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return prefix_;
}

expected<int> file_arrival::open_descriptor() const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return fd_ >= 0 || outcome_; });
  if (fd_ < 0) {
    if (*outcome_) return make_error(errc::internal, name_ + ": the fetch gave no file");
    return outcome_->error();
  }
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return make_error(errc::load_failed,
                      name_ + ": cannot duplicate the fetch's descriptor: " + std::strerror(errno));
  return fd;
}

expected<void> file_arrival::wait_for(std::uint64_t end, std::uint64_t epoch) const {
  std::unique_lock<std::mutex> lock(mutex_);
  while (epoch_ == epoch && prefix_ < end && !outcome_) {
    wanted_ = std::min(wanted_, end);
    changed_.wait(lock);
  }
  if (epoch_ != epoch)
    return make_error(errc::load_failed,
                      name_ + ": the object was replaced while it was being fetched");
  if (prefix_ >= end) return {};
  if (*outcome_)
    return make_error(errc::load_failed, name_ + ": a read past the end of the object");
  return make_error(outcome_->error().code, outcome_->error().message);
}

expected<void> file_arrival::settled(std::uint64_t epoch) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return epoch_ != epoch || outcome_; });
  if (epoch_ != epoch)
    return make_error(errc::load_failed,
                      name_ + ": the object was replaced while it was being fetched");
  return *outcome_;
}

arrival_guard::~arrival_guard() {
  if (arrival_)
    arrival_->finish(make_error(errc::unavailable, arrival_->name() + ": the fetch was abandoned"));
}

}  // namespace warm
