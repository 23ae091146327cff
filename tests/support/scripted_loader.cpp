#include "support/scripted_loader.hpp"

#include <algorithm>
#include <filesystem>

namespace warm::test {

std::string scripted_loader::model_of(const std::string& path) {
  // <root>/<model>/<version>/model.safetensors
  auto p = std::filesystem::path(path);
  return p.parent_path().parent_path().filename().string();
}

expected<std::unique_ptr<resident_model>> scripted_loader::load(device& dev,
                                                                const model_location& where,
                                                                memory_reservation reservation,
                                                                load_stats* stats) {
  auto model = model_of(where.path);
  bool fails = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    started_.push_back(model);
    attempts_.push_back(model + "@" + dev.name());
    changed_.notify_all();
    changed_.wait(lock, [&] { return !holding_ || admitted_ > 0; });
    if (holding_) --admitted_;
    fails = failing_.count({model, ""}) || failing_.count({model, dev.name()});
  }
  if (fails) return make_error(errc::load_failed, model + ": injected failure on " + dev.name());
  return files_.load(dev, where, std::move(reservation), stats);
}

void scripted_loader::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  holding_ = true;
}

void scripted_loader::let_through(int loads) {
  std::lock_guard<std::mutex> lock(mutex_);
  admitted_ += loads;
  changed_.notify_all();
}

void scripted_loader::open_gate() {
  std::lock_guard<std::mutex> lock(mutex_);
  holding_ = false;
  changed_.notify_all();
}

void scripted_loader::fail(const std::string& model, bool failing, const std::string& on_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failing)
    failing_.insert({model, on_device});
  else
    failing_.erase({model, on_device});
}

std::vector<std::string> scripted_loader::started() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

std::vector<std::string> scripted_loader::attempts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return attempts_;
}

int scripted_loader::loads_of(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count(started_.begin(), started_.end(), model));
}

bool scripted_loader::wait_started(std::size_t count, std::chrono::milliseconds limit) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return started_.size() >= count; });
}

}  // namespace warm::test
